"""Date cells rewritten as 'YYYY-MM-DD[ time]' with TensorFlow string ops, for DateFeatures: the
same layouts `text_columns.parse_date` reads in the profile, so that training, serving and
TFLite read a cell alike.

Besides ISO dates: with the year last (`order` MDY or DMY), one- or two-digit months and days
and a two- or four-digit year ('3/14/2012', '03/13/86', Excel's short US date). A two-digit year
is read as POSIX's %y reads it: 69 to 99 in the 1900s, 00 to 68 in the 2000s. A month alone
('1980-01', as pandas writes a monthly period) is not a date here: read as words, its year and
month are categories, which held pmdarima's wineind at RMSE 2,992, where the same months as
dates scored 6,137, worse than the mean (5,800).
"""

from __future__ import annotations

import tensorflow as tf

from models.tabular.text_columns import MDY, YMD


def normalized(text: tf.Tensor, order: str = YMD) -> tf.Tensor:
  """tf.string cells in the layout DateFeatures' DATE_PATTERN reads (others pass unchanged)."""
  if order == YMD:
    return text
  # "3/4/86" -> "03/04/86" -> "03/04/1986" -> "1986-03-04" (MDY) or "1986-04-03" (DMY).
  text = tf.strings.regex_replace(text, r"^(\d)([-/.])", r"0\1\2")
  text = tf.strings.regex_replace(text, r"^(\d\d[-/.])(\d)([-/.])", r"\10\2\3")
  text = tf.strings.regex_replace(text, r"^(\d\d[-/.]\d\d[-/.])(69|[7-9]\d)($|[T ])", r"\119\2\3")
  text = tf.strings.regex_replace(
    text, r"^(\d\d[-/.]\d\d[-/.])([0-5]\d|6[0-8])($|[T ])", r"\120\2\3"
  )
  swap = r"\4-\1-\3" if order == MDY else r"\4-\3-\1"
  return tf.strings.regex_replace(text, r"^(\d\d)([-/.])(\d\d)[-/.](\d{4})", swap)
