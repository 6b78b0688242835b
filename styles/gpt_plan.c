/* The default tensor-parallel plan of the reference GPT (shared spec gpt.md), as text. */
#include "core/error.h"
#include "styles/style_impl.h"

static const char gpt_plan_tp[] = "tok_embeddings = rowwise\n"
                                  "layers.*.attention.wq|wk|wv = colwise\n"
                                  "layers.*.attention.wo = rowwise\n"
                                  "layers.*.feed_forward.w1 = colwise\n"
                                  "layers.*.feed_forward.w2 = rowwise\n"
                                  "output = colwise(output=S(-1), local=false)\n";

/*
 * Megatron sequence parallelism, written like torchtitan's llama plan, except
 * that the residual stream stays a distributed S(1) tensor (local=false on
 * the layers that produce it): the norms then know the global sequence length
 * without exchanging shapes, and uneven sequence shards need nothing special.
 */
static const char gpt_plan_sp[] =
    "tok_embeddings = rowwise(input=R, output=S(1), local=false)\n"
    "pos_embeddings = prepare_output(output=R, desired_output=S(0), local=false)\n"
    "layers.*.attention_norm = sequence\n"
    "layers.*.attention = prepare_input(input=S(1), desired=R)\n"
    "layers.*.attention.wq|wk|wv = colwise\n"
    "layers.*.attention.wo = rowwise(output=S(1), local=false)\n"
    "layers.*.ffn_norm = sequence\n"
    "layers.*.feed_forward = prepare_input(input=S(1), desired=R)\n"
    "layers.*.feed_forward.w1 = colwise\n"
    "layers.*.feed_forward.w2 = rowwise(output=S(1), local=false)\n"
    "norm = sequence\n"
    "output = colwise(input=S(1), output=S(-1), local=false)\n";

const char *dt_plan_gpt_default_text(bool sequence_parallel)
{
    return sequence_parallel ? gpt_plan_sp : gpt_plan_tp;
}

dt_status dt_plan_gpt_default(bool sequence_parallel, dt_plan **out)
{
    DT_ARG_NOT_NULL(out);
    return dt_plan_parse(sequence_parallel ? gpt_plan_sp : gpt_plan_tp, out);
}
