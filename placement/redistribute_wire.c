/*
 * The dtype a redistribute step's reduction travels in. A matmul or linear
 * result made while autocast is bf16 (dt_autocast_set) is what PyTorch's
 * autocast makes a bf16 tensor; when tensor parallelism leaves it Partial (a
 * row-parallel layer's output), its sums are sent and summed in bf16 as
 * PyTorch's are: half the bytes (the comm sums each pair in f32 and rounds).
 * The rules mark such results (spec->wire); every other Partial (the parallel
 * loss, a vocabulary-parallel embedding, gradients) stays f32, as in PyTorch,
 * where those are f32 tensors. Gathers and all-to-alls move values, max/min
 * pick them: both stay in the tensor's dtype.
 */
#include "placement/placement_impl.h"

dt_dtype dt__redist_wire_dtype(const dt__step *st, const dt_spec *src)
{
    bool reduce = st->kind == DT__STEP_ALLREDUCE || st->kind == DT__STEP_REDUCE_SCATTER;
    bool sum = st->src.op == DT_REDUCE_OP_SUM || st->src.op == DT_REDUCE_OP_AVG;
    return reduce && sum ? src->wire : src->dtype;
}
