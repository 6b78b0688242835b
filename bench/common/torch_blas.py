"""Thread control for the PyTorch reference scripts of the benchmarks.

torch.set_num_threads does not reach Debian torch's OpenBLAS pool, so each
script calls limit_blas_threads(n) after importing torch: it finds the
libopenblas this process mapped (the one torch uses, not whatever
ctypes.util.find_library would pick) and sets its thread count.
"""
import ctypes
import os


def limit_blas_threads(n):
    """Limit the mapped OpenBLAS to n threads; returns (library name, core name)."""
    import torch

    torch.zeros(4, 4) @ torch.zeros(4, 4)  # make sure the BLAS is loaded
    with open("/proc/self/maps") as maps:
        paths = [line.split()[-1] for line in maps
                 if "libopenblas" in os.path.basename(line.split()[-1])]
    if not paths:
        return "no OpenBLAS mapped", "?"
    lib = ctypes.CDLL(paths[0])
    lib.openblas_set_num_threads(n)
    core = "?"
    try:
        lib.openblas_get_corename.restype = ctypes.c_char_p
        core = lib.openblas_get_corename().decode()
    except AttributeError:
        pass
    return os.path.basename(paths[0]), core
