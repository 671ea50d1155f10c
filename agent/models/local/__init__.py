"""The embedded model (run in a child process) and all of its small-model help:

- model.py     LocalModel, as a cycle uses it
- worker.py    the child process, and how its death becomes ModelCrashed; child.py, what runs in it
- runtime.py   the GGUF file run by llama-cpp-python
- cache.py     the prompt-prefix cache between cycles
- convert.py   the bundled model's weights as Q8_0, made once in the cache folder
- threads.py   how many threads, and how they wait
- sampling.py  greedy decoding under a grammar, the likeliest token asked about first
- guidance.py  the per-step narrowing of the schema for a small model
"""
