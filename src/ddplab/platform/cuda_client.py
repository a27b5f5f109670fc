"""One small client of the CUDA driver, without torch: the test client a fresh MPS daemon must serve
(sharing_daemon.py) before any rank starts.

Run as a script by its file path (`python cuda_client.py INDEX...`), so that it imports neither torch nor ddplab
(importing torch cost seconds of every shared-device stage). Like a rank, it takes each device's primary context,
writes 4 bytes on the device and reads them back, so the daemon has started a server and run work for a client.
Exit 0: served; otherwise the driver's error name. ctypes and libcuda.so.1 alone.
"""

import ctypes
import sys


def main(indices: list[str]) -> None:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        sys.exit(f"cannot load the CUDA driver: {exc}")

    def call(name: str, *args) -> None:
        code = getattr(cuda, name)(*args)
        if code != 0:
            text = ctypes.c_char_p()
            cuda.cuGetErrorName(code, ctypes.byref(text))
            sys.exit(f"{name} failed: {(text.value or b'error').decode()} ({code})")

    call("cuInit", ctypes.c_uint(0))
    for index in indices:
        device, context = ctypes.c_int(), ctypes.c_void_p()
        pointer, value = ctypes.c_uint64(), ctypes.c_uint32()
        call("cuDeviceGet", ctypes.byref(device), ctypes.c_int(int(index)))
        call("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
        call("cuCtxSetCurrent", context)
        call("cuMemAlloc_v2", ctypes.byref(pointer), ctypes.c_size_t(4))
        call("cuMemsetD32_v2", pointer, ctypes.c_uint(1), ctypes.c_size_t(1))
        call("cuMemcpyDtoH_v2", ctypes.byref(value), pointer, ctypes.c_size_t(4))
        call("cuMemFree_v2", pointer)
        call("cuDevicePrimaryCtxRelease_v2", device)
        if value.value != 1:
            sys.exit(f"device {index}: wrote 1, read back {value.value}")


if __name__ == "__main__":
    main(sys.argv[1:])
