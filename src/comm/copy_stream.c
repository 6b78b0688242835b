/* Copies with streaming stores (see copy_stream.h). */
#include "comm/copy_stream.h"

#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

void dt__copy_stream(void *dst, const void *src, size_t n)
{
    char *d = dst;
    const char *s = src;
#if defined(__SSE2__)
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    head = head < n ? head : n;
    memcpy(d, s, head);
    d += head, s += head, n -= head;
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
        _mm_stream_si128((__m128i *)d, a);
        _mm_stream_si128((__m128i *)(d + 16), b);
        _mm_stream_si128((__m128i *)(d + 32), c);
        _mm_stream_si128((__m128i *)(d + 48), e);
    }
#endif
    memcpy(d, s, n);
}

void dt__copy_stream_fence(void)
{
#if defined(__SSE2__)
    _mm_sfence();
#endif
}
