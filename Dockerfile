# Image that every step of the compiled Kubeflow pipeline runs in (open-source KFP or Vertex AI).
#   docker build -t REGISTRY/tfx-pipeline-kit:TAG . && docker push REGISTRY/tfx-pipeline-kit:TAG
#   python pipeline/run_kubeflow.py --output digits_pipeline.json --image REGISTRY/tfx-pipeline-kit:TAG ...
# The TFX 1.16 image already holds Python 3.10 with TFX, TensorFlow 2.16 and Beam; the lock
# file pins the exact versions this project is tested with, installed over them without
# resolving again.
FROM gcr.io/tfx-oss-public/tfx:1.16.0

# tf.keras must be Keras 2 (tf_keras) for tensorflow-model-optimization, in every step.
ENV TF_USE_LEGACY_KERAS=1 \
    TF_CPP_MIN_LOG_LEVEL=2 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /pipeline
COPY requirements.lock ./
RUN python -m pip install --no-cache-dir --no-deps -r requirements.lock

COPY pyproject.toml setup.cfg README.md ./
COPY core/ core/
COPY components/ components/
COPY models/ models/
COPY pipeline/ pipeline/
COPY data/ data/
RUN python -m pip install --no-cache-dir --no-deps .

# Every class the compiled packages name, imported the way the steps' entrypoint
# (python -m pipeline.definition.kfp_entrypoint) imports them, so a missing module fails the build and not
# a nightly run: the executors of every task `run_kubeflow.py` can emit and the custom artifact
# types. tests/kubeflow/test_kubeflow_compile.py keeps this list equal to what the compiled packages name.
ARG CLASS_PATHS="\
components.HtmlReport \
components.OptimizationReport \
components.OptimizedModel \
components.data_gate.executor.Executor \
components.distributed_trainer.executor.Executor \
components.distributed_trainer.tuner.TunerExecutor \
components.evaluator.executor.Executor \
components.example_gen.executor.Executor \
components.live_model.executor.Executor \
components.optimizer.executor.Executor \
components.pusher.executor.Executor \
components.report.executor.Executor \
components.statistics_gen.executor.Executor \
tfx.components.example_validator.executor.Executor \
tfx.components.schema_gen.executor.Executor \
tfx.components.schema_gen.import_schema_gen.executor.Executor \
tfx.components.transform.executor.Executor"
RUN python -m pipeline.definition.kfp_entrypoint check-imports $CLASS_PATHS
# The trainer functions the steps load by module path (components/defaults.py: the default
# model's run_fn and tuner_fn, and the run_fn that trains build_model modules), imported alike.
ARG MODULE_FNS="\
models.tabular.custom_network.run_fn \
models.tabular.module.run_fn \
models.tabular.module.tuner_fn"
RUN python -m pipeline.definition.kfp_entrypoint check-imports $MODULE_FNS
