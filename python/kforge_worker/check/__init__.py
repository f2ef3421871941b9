"""check: how two tensors are compared, used by the judge (correctness, verified timed trials),
by the candidate process (its inputs left unchanged, their bit digests) and by the warm-ups.

- compare.py: dtype-aware tolerances, strict NaN/Inf rules, bit equality and digests, reports
- fused_compare.py: the same comparison of one output in a single pass (one Triton kernel)
- bits.py: a tensor's elements as the integers of their bits (both of the above read them)

May import: core.
"""
