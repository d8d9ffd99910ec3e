"""Library functions on their own: plain values in, plain values out, no pipeline run."""
