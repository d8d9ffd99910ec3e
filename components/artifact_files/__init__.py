"""The files one step writes into its output artifact and other steps read, each with one owner.

Other steps read the Optimizer's, the Evaluator's and the data gate's outputs through these
modules instead of importing those components: `variant_index` (the OptimizedModel's
variants.json, which the Optimizer writes and the Pusher, the report and the run summary read),
`evaluation_metrics` (a ModelEvaluation's overall metrics and its thresholds' verdict in words,
for the Pusher and the report),
`gate_result` (gate.json in the DataGate's result).
"""
