"""Helpers the tests share: data writers, subprocess runners, fakes of Kubernetes and KFP."""
