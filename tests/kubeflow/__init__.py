"""The Kubeflow side: the compiled package, its tasks on a local launcher, TFJob and KFP clients."""
