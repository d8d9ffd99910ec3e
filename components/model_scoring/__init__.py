"""A SavedModel scored on serialized examples, as the Evaluator and the data gate both run one.

  outputs_lib   one model's predictions and labels on TFRecord files, in batches, fed as TFMA
                feeds it (the serving signature, the preprocessing signature for the label)
  conform_lib   tonight's examples in the column types a live version was trained on

TensorFlow is imported inside the functions that run a model, so importing this package is cheap.
"""
