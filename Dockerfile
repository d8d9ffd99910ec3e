# Image that every step of the compiled Kubeflow pipeline runs in.
#   docker build -t IMAGE . && docker push IMAGE
#   python pipeline/run_kubeflow.py --output digits_pipeline.json --image IMAGE ...
# The TFX 1.16 image already holds Python 3.10 with TFX, TensorFlow 2.16 and Beam;
# the lock file pins the exact versions this project is tested with.
FROM gcr.io/tfx-oss-public/tfx:1.16.0

# tf.keras must be Keras 2 (tf_keras) for tensorflow-model-optimization, in every step.
ENV TF_USE_LEGACY_KERAS=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /pipeline
COPY requirements.lock ./
RUN python -m pip install --no-cache-dir --no-deps -r requirements.lock

COPY pyproject.toml setup.cfg README.md ./
COPY components/ components/
COPY pipeline/ pipeline/
COPY data/ data/
# Executors are imported from the installed package (components.*), never __main__.
RUN python -m pip install --no-cache-dir --no-deps . \
 && python -c "import components.example_gen.executor, components.pusher.executor"
