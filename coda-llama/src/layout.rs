//! Weight layouts: the kernels want the gate/up rows interleaved and each
//! head's RoPE pairs adjacent, so that pairwise maps stay in registers.
//! These convert ordinary Llama checkpoints (separate gate and up, q and k in
//! the "rotate_half" pairing `(i, i + head_dim/2)`) and back.
//!
//! Permuting the rows of `Wq` and `Wk` the same way permutes the columns of
//! q and k the same way inside each head, so attention scores `q · kᵀ` are
//! unchanged; v is left as it is.

/// `[g0, u0, g1, u1, …]` rows from `gate` and `up`, each `[f, d]`.
pub fn interleave_gate_up<T: Copy>(gate: &[T], up: &[T], f: usize, d: usize) -> Vec<T> {
    assert_eq!(gate.len(), f * d, "gate must be [f, d]");
    assert_eq!(up.len(), f * d, "up must be [f, d]");
    let mut out = Vec::with_capacity(2 * f * d);
    for j in 0..f {
        out.extend_from_slice(&gate[j * d..(j + 1) * d]);
        out.extend_from_slice(&up[j * d..(j + 1) * d]);
    }
    out
}

/// The inverse of [`interleave_gate_up`]: `(gate, up)`.
pub fn split_gate_up<T: Copy>(w: &[T], f: usize, d: usize) -> (Vec<T>, Vec<T>) {
    assert_eq!(w.len(), 2 * f * d, "w must be [2f, d]");
    let rows = |part: usize| (0..f).flat_map(|j| w[(2 * j + part) * d..(2 * j + part + 1) * d].iter().copied()).collect();
    (rows(0), rows(1))
}

/// Reorders each head's rows from the rotate_half pairing `(i, i + hd/2)` to
/// adjacent pairs `(2i, 2i + 1)`; `w` is `[heads · hd, d]`.
pub fn rope_pairs_adjacent<T: Copy>(w: &[T], heads: usize, head_dim: usize, d: usize) -> Vec<T> {
    permute_head_rows(w, heads, head_dim, d, |new| if new % 2 == 0 { new / 2 } else { new / 2 + head_dim / 2 })
}

/// The inverse of [`rope_pairs_adjacent`].
pub fn rope_pairs_half<T: Copy>(w: &[T], heads: usize, head_dim: usize, d: usize) -> Vec<T> {
    let half = head_dim / 2;
    permute_head_rows(w, heads, head_dim, d, |new| if new < half { 2 * new } else { 2 * (new - half) + 1 })
}

fn permute_head_rows<T: Copy>(w: &[T], heads: usize, hd: usize, d: usize, old_of: impl Fn(usize) -> usize) -> Vec<T> {
    assert_eq!(w.len(), heads * hd * d, "w must be [heads · head_dim, d]");
    assert!(hd % 2 == 0, "head_dim must be even");
    let mut out = Vec::with_capacity(w.len());
    for h in 0..heads {
        for new in 0..hd {
            let old = h * hd + old_of(new);
            out.extend_from_slice(&w[old * d..(old + 1) * d]);
        }
    }
    out
}

/// The kernels' `[(heads + 2·kv_heads) · hd, d]` qkv weight from checkpoint
/// `wq` `[heads · hd, d]`, `wk` and `wv` `[kv_heads · hd, d]` (rotate_half pairing).
pub fn qkv_from_checkpoint<T: Copy>(wq: &[T], wk: &[T], wv: &[T], heads: usize, kv_heads: usize, hd: usize, d: usize) -> Vec<T> {
    let mut out = rope_pairs_adjacent(wq, heads, hd, d);
    out.extend(rope_pairs_adjacent(wk, kv_heads, hd, d));
    assert_eq!(wv.len(), kv_heads * hd * d, "wv must be [kv_heads · head_dim, d]");
    out.extend_from_slice(wv);
    out
}
