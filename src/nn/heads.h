/*
 * The multi-head part of attention shared by Attention (attention.c),
 * MultiheadAttention (multihead_attention.c) and the KV cache (kv_cache.c):
 * projections split into heads, the scaled dot product over them, heads
 * merged back. Private to src/nn/.
 */
#ifndef DT_NN_HEADS_H
#define DT_NN_HEADS_H

#include "dtensor/nn.h"

/* Projection @p x ("q", "k" or "v" of module @p m, named in the error) from
 * [B, T, H*hd] to [B, H, T, hd] (a view when possible); DT_ERR_INVALID_ARG
 * unless it is 3-d with a whole number of heads of @p head_dim. */
dt_status dt__heads_split(const dt_module *m, const char *what, dt_tensor *x, int64_t head_dim,
                          dt_tensor **out);

/* [B, H, T, hd] -> [B, T, H*hd] (contiguous). */
dt_status dt__heads_merge(dt_tensor *o, dt_tensor **out);

/* softmax(q k^T / sqrt(hd)) v on [B, H, *, hd] heads; @p causal masks key j
 * from query i when j > i + (keys - queries), the mask aligned to the last key
 * (with a KV cache the keys run ahead of the new queries). */
dt_status dt__heads_attend(dt_tensor *qh, dt_tensor *kh, dt_tensor *vh, bool causal,
                           dt_tensor **out);

#endif
