/*
 * A stand-in for bcryptprimitives.dll, which Wine 8 does not ship but which
 * the runtime of every Windows binary built by Go 1.22 or later loads at start
 * for ProcessPrng, its source of random bytes. Only CI's Wine needs it: real
 * Windows (10 and later) has the real DLL. .ci/wine-test builds it with
 * Debian's mingw-w64 cross compiler into the Wine prefix's system32; no
 * binary is kept in the repository.
 *
 * ProcessPrng fills the buffer with random bytes and always returns TRUE on
 * Windows; here the bytes come from RtlGenRandom (advapi32's
 * SystemFunction036), which Wine implements, and a failure is reported as
 * FALSE, which makes the Go runtime abort instead of using bad randomness.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!SystemFunction036(data, n))
            return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
