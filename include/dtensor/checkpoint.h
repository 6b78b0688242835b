/*
 * dtensor/checkpoint.h - safetensors files and full state dicts.
 *
 * safetensors (the Hugging Face format PyTorch loads): 8 bytes little-endian
 * header length N, N bytes of UTF-8 JSON
 *     {"__metadata__": {"k": "v"}, "name": {"dtype": "F32", "shape": [2, 3],
 *      "data_offsets": [begin, end]}, ...}
 * padded with spaces to a multiple of 8, then the data section: every tensor's
 * raw little-endian row-major bytes at [begin, end) relative to the section.
 *
 * The writer produces exactly the bytes of the reference writer
 * (safetensors.torch.save_file): compact JSON, "__metadata__" first, tensors
 * ordered by dtype (I64, F64, F32, I32, BF16, F16, U16, U8) then by name,
 * header padded with spaces to 8 bytes. It streams: the header is computed from
 * names, dtypes and shapes first, then each tensor's data is written in turn,
 * so only one tensor needs to be in memory at a time. Files are written to a
 * temporary name in the same directory, fsync'ed, renamed and the directory
 * fsync'ed: a crash never leaves a half-written file under the real name.
 *
 * The reader maps the file (mmap) and treats it as hostile: every length,
 * offset, dtype, shape and name is checked before use, and any inconsistency
 * is DT_ERR_FORMAT with a message naming the file, the tensor and the value
 * (header length past the end of the file or over 100 MB, header not a JSON
 * object or not valid UTF-8, trailing bytes after the JSON other than
 * whitespace, unknown dtype, shape entries that are not non-negative integers
 * or whose product overflows, data_offsets that overlap, leave gaps, run past
 * the data or do not cover it exactly, byte counts that disagree with
 * dtype x shape, duplicate names, a non-string metadata value). A valid file
 * holding a dtype dtensor has no equivalent (BOOL, I8, U32, ...) opens; reading
 * that tensor is DT_ERR_UNSUPPORTED. More than DT_MAX_DIMS dims:
 * DT_ERR_UNSUPPORTED at open. The file must not be truncated by another
 * process while it is open (the mapping would fault).
 *
 * Thread safety: an open dt_safetensors is read-only and may be read from
 * several threads; a writer is used by one thread.
 */
#ifndef DTENSOR_CHECKPOINT_H
#define DTENSOR_CHECKPOINT_H

#include "dtensor/nn.h"
#include "dtensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ reading */

typedef struct dt_safetensors dt_safetensors;

/** One tensor of an open file. Pointers are borrowed from the open file. */
typedef struct dt_safetensors_info {
    const char *name;
    const char *dtype_name; /* as written in the file: "F32", "BOOL", ... */
    dt_dtype dtype;         /* DT_DTYPE_COUNT when dtensor has no such dtype */
    int ndim;
    int64_t shape[DT_MAX_DIMS];
    uint64_t offset; /* begin, relative to the data section */
    uint64_t nbytes; /* end - begin */
} dt_safetensors_info;

/**
 * Open and validate the safetensors file @p path (mapped read-only).
 * Errors: DT_ERR_SYSTEM (cannot open/stat/map, with strerror),
 * DT_ERR_INVALID_ARG when @p path is not a regular file ("<path> is a FIFO,
 * not a regular file"; checked without blocking), DT_ERR_FORMAT
 * (see the top of this file), DT_ERR_UNSUPPORTED (more than DT_MAX_DIMS dims).
 * Not collective. Close with dt_safetensors_close.
 */
DT_API dt_status dt_safetensors_open(const char *path, dt_safetensors **out);
/**
 * Same on @p len bytes at @p data (borrowed: they must stay valid and
 * unchanged until dt_safetensors_close). Messages name the file "<memory>".
 */
DT_API dt_status dt_safetensors_open_memory(const void *data, size_t len, dt_safetensors **out);
/** Unmap and free. NULL-safe. */
DT_API void dt_safetensors_close(dt_safetensors *f);

/** Number of tensors; they are indexed 0..count-1 in data-offset order. */
DT_API int dt_safetensors_count(const dt_safetensors *f);
/** Describe tensor @p i. DT_ERR_INVALID_ARG when i is out of range. */
DT_API dt_status dt_safetensors_info_at(const dt_safetensors *f, int i, dt_safetensors_info *out);
/** Index of the tensor called @p name. DT_ERR_NOT_FOUND naming it. */
DT_API dt_status dt_safetensors_find(const dt_safetensors *f, const char *name, int *index);
/** The raw bytes of tensor @p i inside the mapping (borrowed); NULL when out of range. */
DT_API const void *dt_safetensors_data_at(const dt_safetensors *f, int i);

/** Number of "__metadata__" entries (0 when absent). */
DT_API int dt_safetensors_metadata_count(const dt_safetensors *f);
/** Key / value of metadata entry @p i in file order (borrowed); NULL out of range. */
DT_API const char *dt_safetensors_metadata_key_at(const dt_safetensors *f, int i);
DT_API const char *dt_safetensors_metadata_value_at(const dt_safetensors *f, int i);
/** The metadata value for @p key (borrowed), or NULL. */
DT_API const char *dt_safetensors_metadata_get(const dt_safetensors *f, const char *key);

/**
 * A new contiguous CPU tensor holding a copy of the tensor called @p name.
 * Errors: DT_ERR_NOT_FOUND, DT_ERR_UNSUPPORTED (dtype without equivalent),
 * DT_ERR_NO_MEMORY.
 */
DT_API dt_status dt_safetensors_load(const dt_safetensors *f, const char *name, dt_tensor **out);

/**
 * Copy the box of tensor @p i that starts at @p offset (ndim entries; NULL =
 * zeros) and has dst's shape into @p dst (a local tensor of the same dtype and
 * ndim, any layout, any device). Only the bytes of the box are read (rows of
 * the innermost dim: a shard along a non-leading dim is a strided gather).
 * Errors: DT_ERR_INVALID_ARG naming the tensor (dtype or ndim mismatch, box
 * outside the tensor), DT_ERR_UNSUPPORTED (dtype without equivalent).
 */
DT_API dt_status dt_safetensors_read_box(const dt_safetensors *f, int i, const int64_t *offset,
                                         dt_tensor *dst);

/* ================================================================ writing */

/** What one tensor of a file to write looks like. */
typedef struct dt_safetensors_entry {
    const char *name; /* non-empty, valid UTF-8, not "__metadata__" */
    dt_dtype dtype;
    int ndim;
    const int64_t *shape; /* ndim sizes >= 0 */
} dt_safetensors_entry;

typedef struct dt_safetensors_writer dt_safetensors_writer;

/**
 * Start writing @p n tensors described by @p entries (copied) and @p n_meta
 * metadata pairs @p meta = {key0, value0, key1, value1, ...} to @p path:
 * computes the layout, creates a temporary file "<path>.tmp-XXXXXX" in the
 * same directory and writes the header. Then pass each tensor's data, in the
 * order dt_safetensors_writer_next gives, to dt_safetensors_writer_write, and
 * finish with dt_safetensors_writer_commit (or _abort).
 * Errors: DT_ERR_INVALID_ARG naming the entry (empty, reserved, duplicate or
 * invalid UTF-8 name or key, bad dtype or shape), DT_ERR_SYSTEM (cannot create
 * the temporary file; strerror). Not collective.
 */
DT_API dt_status dt_safetensors_writer_create(const char *path, int n,
                                              const dt_safetensors_entry *entries, int n_meta,
                                              const char *const *meta, dt_safetensors_writer **out);
/** Index (into the entries given at creation) of the tensor to write next; -1 when done. */
DT_API int dt_safetensors_writer_next(const dt_safetensors_writer *w);
/**
 * Write @p t as the data of entry dt_safetensors_writer_next(w): same dtype
 * and shape, any layout and device (copied to the host in pieces if needed).
 * Errors: DT_ERR_INVALID_ARG (no entry left, dtype or shape mismatch naming
 * the entry), DT_ERR_SYSTEM (write failed; strerror). After an error the
 * writer can only be aborted.
 */
DT_API dt_status dt_safetensors_writer_write(dt_safetensors_writer *w, const dt_tensor *t);
/**
 * Check every entry was written, fsync the file, rename it to the real path
 * and fsync the directory. Frees @p w in every case; on failure the temporary
 * file is removed and the real path is untouched.
 * Errors: DT_ERR_INVALID_ARG (entries left unwritten), DT_ERR_SYSTEM.
 */
DT_API dt_status dt_safetensors_writer_commit(dt_safetensors_writer *w);
/** Remove the temporary file and free @p w. NULL-safe. */
DT_API void dt_safetensors_writer_abort(dt_safetensors_writer *w);

/**
 * Write @p n local tensors named @p names (+ @p n_meta metadata pairs) to
 * @p path in one call (writer_create, write each, commit). Errors as above.
 */
DT_API dt_status dt_safetensors_save(const char *path, int n, const char *const *names,
                                     dt_tensor *const *tensors, int n_meta,
                                     const char *const *meta);

/* ================================================================ full state dicts */

/**
 * Save every parameter of @p root, keyed by its FQN, to the safetensors file
 * @p path (PyTorch's collect_state_dict / get_model_state_dict with
 * full_state_dict, then safetensors.torch.save_file).
 *
 * Parameters may be local or distributed. When some are distributed it is
 * collective over their mesh (all distributed parameters must share one mesh,
 * dt_mesh_equal): one parameter at a time is gathered with dt_full_tensor and
 * mesh rank 0 writes it, so no rank ever holds more than one full parameter;
 * the other ranks write nothing. Every rank returns the same status (the
 * writer's failure is reported everywhere). With only local parameters it is
 * not collective: the caller writes the file. (On a mesh slice, rank 0 of
 * each slice writes the same bytes; the rename keeps the file whole.)
 * Metadata: {"format": "pt"}.
 * Errors: DT_ERR_INVALID_ARG (no parameters, parameters on different meshes),
 * the writer's errors, the collectives' errors.
 */
DT_API dt_status dt_save_full(dt_module *root, const char *path);

/**
 * Load the file @p path written by dt_save_full (or by PyTorch's safetensors
 * writer) into the parameters of @p root, in place. Every rank maps the file
 * and reads only the byte ranges of its own shards (dt_safetensors_read_box);
 * not collective. Everything is validated before any parameter is written, so
 * on error the model is unchanged.
 * Errors: the reader's (DT_ERR_FORMAT, DT_ERR_SYSTEM); DT_ERR_INVALID_ARG
 * naming the FQN for a parameter missing from the file, a file tensor the
 * model does not have, a dtype or (global) shape mismatch;
 * DT_ERR_UNSUPPORTED for a Partial parameter.
 */
DT_API dt_status dt_load_full(dt_module *root, const char *path);

/* ================================================================ sharded checkpoints */

/*
 * A sharded checkpoint is a directory:
 *   rank-<R>.<save_id>.safetensors  the distinct shards world rank R holds,
 *                                   keyed by FQN (a split-factor shard,
 *                                   dt_strided_shard_split, is one tensor per
 *                                   box: the FQN, then "<fqn>#<j>" for box
 *                                   j >= 1) (each shard stored once: by
 *                                   the rank at coordinate 0 of every mesh dim
 *                                   that replicates it; local parameters by
 *                                   world rank 0), metadata format=pt,
 *                                   dtensor.save_id, dtensor.rank (and with an
 *                                   optimizer dtensor.optim, dtensor.optim_step);
 *   index.json                      written last by world rank 0: format
 *                                   "dtensor-sharded", version 1, save_id,
 *                                   world_size, with an optimizer "optim":
 *                                   {"name": "adamw", "step": N, "lr": x}, and
 *                                   per tensor its dtype, global shape,
 *                                   placements (informative) and every shard's
 *                                   file, key, offset and shape.
 * Tensors are the parameters by FQN and, with an optimizer, its state as
 * "optim.<fqn>.<state>" (state names as dt_optim_state_name: momentum_buffer;
 * exp_avg, exp_avg_sq) with the parameter's placements (dt_optim_state_placed):
 * under ZeRO-1/2/3 the state is sharded over dp like the parameter's slot, and
 * a load into another layout reshards it exactly like the parameters. There
 * is no RNG state to save (training draws no random numbers after init).
 * Every file is written to a temporary name, fsync'ed and renamed; the save id
 * in the rank files' names means a new save into the same directory never
 * touches the files the current index.json names, so a crash at any point
 * leaves the previous checkpoint loadable. After the new index is in place,
 * world rank 0 removes the rank files of older saves (best effort).
 */

/**
 * Save @p root's parameters as a sharded checkpoint in @p dir (created if
 * missing; its parent must exist). Collective over the parameters' mesh when
 * some are distributed (one mesh for all, as dt_save_full); ranks of a mesh
 * slice that does not contain world rank 0 hold replicas of the slice that
 * does and return DT_OK at once without writing. With only local parameters
 * it is not collective: each caller saves, under an exclusive flock on
 * <dir>/.lock, so processes saving into one directory at once leave one
 * whole checkpoint (the last). Every participating rank
 * returns the same status. With @p optim (may be NULL) its state and step
 * count are saved too; states not allocated yet are allocated zero first
 * (dt_optim_state_init: what the first step would use). @p optim must have
 * been created over @p root after parallelizing (it holds the same tensors).
 * Errors: DT_ERR_UNSUPPORTED (a Partial parameter), DT_ERR_INVALID_ARG (as
 * dt_save_full; an optimizer over other tensors), DT_ERR_SYSTEM (files),
 * collectives'.
 */
DT_API dt_status dt_checkpoint_save(dt_module *root, dt_optim *optim, const char *dir);

/**
 * Load a sharded checkpoint from @p dir into @p root's parameters, whatever
 * mesh and placements they have now (another world size, another plan, or
 * all local): each rank reads only the parts of the stored shards that
 * overlap its own shards. Not collective. Everything (index, files, keys,
 * dtypes, shapes, coverage) is validated before any parameter is written.
 * Errors: DT_ERR_SYSTEM (cannot read index.json or a rank file),
 * DT_ERR_INVALID_ARG "... is a FIFO, not a regular file" (or a directory, a
 * device: refused without blocking), DT_ERR_FORMAT (hostile or inconsistent
 * index.json or rank file, shards that do not cover a parameter, a rank file
 * of another save; with @p optim, a rank file whose optimizer or step differs
 * from index.json's, naming both: "<dir>/index.json records optimizer step
 * 9, but <dir>/rank-0.<id>.safetensors holds step 5"), DT_ERR_INVALID_ARG
 * naming the FQN (missing from the checkpoint, not in the model, dtype or
 * global shape mismatch), DT_ERR_UNSUPPORTED (a Partial parameter).
 * With @p optim its state is loaded (resharded like the parameters) and its
 * step count set from the checkpoint: DT_ERR_INVALID_ARG when the checkpoint
 * holds no optimizer state, another optimizer's (sgd vs adamw), or other
 * states (SGD momentum on one side only). With @p optim NULL any optimizer
 * state in the checkpoint is ignored.
 */
DT_API dt_status dt_checkpoint_load(dt_module *root, dt_optim *optim, const char *dir);

#ifdef __cplusplus
}
#endif
#endif /* DTENSOR_CHECKPOINT_H */
