"""Triton 3.6's interpreter under NumPy >= 2.4: a loop with run-time bounds (``range(0, n, B)``,
a persistent ``range(pid, n, step)``) converts a one-element array to an int, which NumPy 2.4
made a TypeError. This applies the upstream fix (triton-lang/triton#9172, after 3.6.0) when
the interpreter is on (TRITON_INTERPRET=1, the cpu device) and does nothing otherwise.

`kforge bench` appends this file to a library kernel's source for jobs on the cpu device (so
does the workbench), and tests/kernels applies it in-process. Remove it once the Triton in use
has the fix.
"""

import os

if os.environ.get("TRITON_INTERPRET") == "1":
    import triton.runtime.interpreter as _triton_interpreter

    if not getattr(_triton_interpreter, "_kforge_index_fix", False):
        _patch_lang_tensor = _triton_interpreter._patch_lang_tensor

        def _patch_lang_tensor_with_scalar_index(tensor, scope):
            _patch_lang_tensor(tensor, scope)
            scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

        _triton_interpreter._patch_lang_tensor = _patch_lang_tensor_with_scalar_index
        _triton_interpreter._kforge_index_fix = True
