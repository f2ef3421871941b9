"""process: making a job's processes: isolating them and warming them up. The judge starts its
candidate process through it, so it sits below the judge; the zygote and the child at the
package's top level put it to work.

- sandbox.py: the first steps of a forked child and the fallback isolation where there is no jail
- jailer.py: the jail (libkforge_sandbox.so), and starting the candidate process and its main
- warmup.py: the warm-up of the zygote (no CUDA) and of each job process (CUDA, first launches)
- warm_kernels.py: the tiny Triton kernel the warm-ups compile and launch
- triton_cache.py: a Triton cache that reads through read-only layers (TRITON_CACHE_MANAGER)

May import: core, check, timing, candidate.
"""
