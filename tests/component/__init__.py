"""Each component: construction, and its executor's Do on tiny data in temp folders."""
