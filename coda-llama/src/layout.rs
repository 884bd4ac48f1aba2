//! Weight layouts: the kernels want the gate/up rows interleaved and each
//! head's RoPE pairs adjacent, so that pairwise maps stay in registers.
//! These convert ordinary Llama checkpoints (separate gate and up, q and k in
//! the "rotate_half" pairing `(i, i + head_dim/2)`) and back.
//!
//! Permuting the rows of `Wq` and `Wk` the same way permutes the columns of
//! q and k the same way inside each head, so attention scores `q · kᵀ` are
//! unchanged; v is left as it is.
//!
//! Each converter takes its sizes by name ([`FfnDims`], [`QkvDims`],
//! [`HeadRows`]; a `&BlockConfig` converts into the first two): a product
//! such as `f · d` is one length either way round, so sizes given in the
//! wrong order would pass the length check and permute the wrong rows. Each
//! checks its slices' lengths against them (with checked products) and
//! refuses a mismatch with [`Error::Arg`].

use coda_runtime::Error;

/// The MLP's sizes: `gate` and `up` are `[ffn, hidden]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FfnDims {
    pub ffn: usize,
    pub hidden: usize,
}

/// The attention projections' sizes: `wq` is `[heads · head_dim, hidden]`,
/// `wk` and `wv` `[kv_heads · head_dim, hidden]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QkvDims {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub hidden: usize,
}

/// A weight whose rows come in heads: `[heads · head_dim, cols]` (a QK-norm
/// weight is one head of one column).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadRows {
    pub heads: usize,
    pub head_dim: usize,
    pub cols: usize,
}

/// Checks that `v` holds `dims` row-major (`rule` says which, in words);
/// when their product overflows, no slice does.
fn shaped<T>(name: &str, v: &[T], rule: &str, dims: &[usize]) -> Result<(), Error> {
    let want = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    if want == Some(v.len()) {
        return Ok(());
    }
    let want = want.map_or("more than usize::MAX".to_string(), |n| n.to_string());
    Err(Error::arg(name, format!("{} elements, must be {rule}: {want} elements", v.len())))
}

/// `[g0, u0, g1, u1, …]` rows from `gate` and `up`, each `[f, d]`; a
/// length that is not `f · d` is [`Error::Arg`].
pub fn interleave_gate_up<T: Copy>(gate: &[T], up: &[T], dims: impl Into<FfnDims>) -> Result<Vec<T>, Error> {
    let FfnDims { ffn: f, hidden: d } = dims.into();
    let rule = format!("[f, d] = [{f}, {d}]");
    shaped("gate", gate, &rule, &[f, d])?;
    shaped("up", up, &rule, &[f, d])?;
    let mut out = Vec::with_capacity(gate.len() + up.len());
    for j in 0..f {
        out.extend_from_slice(&gate[j * d..(j + 1) * d]);
        out.extend_from_slice(&up[j * d..(j + 1) * d]);
    }
    Ok(out)
}

/// The inverse of [`interleave_gate_up`]: `(gate, up)`; a length of `w`
/// that is not `2 · f · d` is [`Error::Arg`].
pub fn split_gate_up<T: Copy>(w: &[T], dims: impl Into<FfnDims>) -> Result<(Vec<T>, Vec<T>), Error> {
    let FfnDims { ffn: f, hidden: d } = dims.into();
    shaped("w", w, &format!("[2f, d] with f = {f}, d = {d}"), &[2, f, d])?;
    let rows = |part: usize| (0..f).flat_map(|j| w[(2 * j + part) * d..(2 * j + part + 1) * d].iter().copied()).collect();
    Ok((rows(0), rows(1)))
}

/// Reorders each head's rows from the rotate_half pairing `(i, i + hd/2)` to
/// adjacent pairs `(2i, 2i + 1)`. An odd or zero `head_dim`, or a length of
/// `w` that is not `heads · head_dim · cols`, is [`Error::Arg`].
pub fn rope_pairs_adjacent<T: Copy>(w: &[T], rows: HeadRows) -> Result<Vec<T>, Error> {
    pairs_adjacent(("w", "heads", "cols"), w, rows.heads, rows.head_dim, rows.cols)
}

/// The inverse of [`rope_pairs_adjacent`], with its rules.
pub fn rope_pairs_half<T: Copy>(w: &[T], rows: HeadRows) -> Result<Vec<T>, Error> {
    pairs_half(("w", "heads", "cols"), w, rows.heads, rows.head_dim, rows.cols)
}

fn pairs_adjacent<T: Copy>(names: (&str, &str, &str), w: &[T], heads: usize, hd: usize, d: usize) -> Result<Vec<T>, Error> {
    permute_head_rows(names, w, heads, hd, d, |new| if new % 2 == 0 { new / 2 } else { new / 2 + hd / 2 })
}

fn pairs_half<T: Copy>(names: (&str, &str, &str), w: &[T], heads: usize, hd: usize, d: usize) -> Result<Vec<T>, Error> {
    let half = hd / 2;
    permute_head_rows(names, w, heads, hd, d, |new| if new < half { 2 * new } else { 2 * (new - half) + 1 })
}

/// Permutes the rows of each head of `w` (`names`: the weight's, its head count's and its width's).
fn permute_head_rows<T: Copy>(
    (name, heads_name, cols_name): (&str, &str, &str),
    w: &[T],
    heads: usize,
    hd: usize,
    d: usize,
    old_of: impl Fn(usize) -> usize,
) -> Result<Vec<T>, Error> {
    if hd == 0 || hd % 2 != 0 {
        return Err(Error::arg("head_dim", format!("{hd} must be positive and even (RoPE rotates pairs)")));
    }
    shaped(name, w, &format!("[{heads_name} · head_dim, {cols_name}] with {heads_name} = {heads}, head_dim = {hd}, {cols_name} = {d}"), &[heads, hd, d])?;
    let mut out = Vec::with_capacity(w.len());
    for h in 0..heads {
        for new in 0..hd {
            let old = h * hd + old_of(new);
            out.extend_from_slice(&w[old * d..(old + 1) * d]);
        }
    }
    Ok(out)
}

/// The kernels' `[(heads + 2·kv_heads) · hd, d]` qkv weight from checkpoint
/// `wq` `[heads · hd, d]`, `wk` and `wv` `[kv_heads · hd, d]` (rotate_half
/// pairing); the rules of [`rope_pairs_adjacent`], naming `wq`, `wk` or `wv`.
pub fn qkv_from_checkpoint<T: Copy>(wq: &[T], wk: &[T], wv: &[T], dims: impl Into<QkvDims>) -> Result<Vec<T>, Error> {
    let QkvDims { heads, kv_heads, head_dim: hd, hidden: d } = dims.into();
    let mut out = pairs_adjacent(("wq", "heads", "d"), wq, heads, hd, d)?;
    out.extend(pairs_adjacent(("wk", "kv_heads", "d"), wk, kv_heads, hd, d)?);
    shaped("wv", wv, &format!("[kv_heads · head_dim, d] with kv_heads = {kv_heads}, head_dim = {hd}, d = {d}"), &[kv_heads, hd, d])?;
    out.extend_from_slice(wv);
    Ok(out)
}

/// The inverse of [`qkv_from_checkpoint`]: checkpoint `(wq, wk, wv)` from
/// the kernels' qkv weight; a length of `w_qkv` that is not
/// `(heads + 2·kv_heads) · head_dim · d`, or an odd `head_dim`, is [`Error::Arg`].
#[allow(clippy::type_complexity)]
pub fn qkv_to_checkpoint<T: Copy>(w_qkv: &[T], dims: impl Into<QkvDims>) -> Result<(Vec<T>, Vec<T>, Vec<T>), Error> {
    let QkvDims { heads, kv_heads, head_dim: hd, hidden: d } = dims.into();
    let rows = heads.checked_add(kv_heads.checked_mul(2).unwrap_or(usize::MAX)).unwrap_or(usize::MAX);
    shaped("w_qkv", w_qkv, &format!("[(heads + 2·kv_heads) · head_dim, d] with heads = {heads}, kv_heads = {kv_heads}, head_dim = {hd}, d = {d}"), &[rows, hd, d])?;
    let (q_len, kv_len) = (heads * hd * d, kv_heads * hd * d);
    let (q, rest) = w_qkv.split_at(q_len);
    let (k, v) = rest.split_at(kv_len);
    Ok((pairs_half(("w_qkv", "heads", "d"), q, heads, hd, d)?, pairs_half(("w_qkv", "kv_heads", "d"), k, kv_heads, hd, d)?, v.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::refused;

    /// Slices of the wrong length are refused by name, also for dims whose
    /// product wraps around to the slice's length.
    #[test]
    fn gate_up_lengths_are_checked() {
        let (f, d) = (3, 4);
        let dims = FfnDims { ffn: f, hidden: d };
        let (gate, up): (Vec<u32>, Vec<u32>) = ((0..12).collect(), (100..112).collect());
        let w = interleave_gate_up(&gate, &up, dims).unwrap();
        assert_eq!(split_gate_up(&w, dims).unwrap(), (gate.clone(), up.clone()));
        refused(interleave_gate_up(&gate[..11], &up, dims), "gate", "11 elements, must be [f, d] = [3, 4]: 12 elements");
        refused(interleave_gate_up(&gate, &up[..8], dims), "up", "must be [f, d]");
        refused(interleave_gate_up(&gate, &up, FfnDims { ffn: (1 << 63) + 6, hidden: 2 }), "gate", ": more than usize::MAX elements");
        refused(split_gate_up(&w[..20], dims), "w", "must be [2f, d] with f = 3, d = 4: 24 elements");
        refused(split_gate_up(&w, FfnDims { ffn: (1 << 62) + 6, hidden: 2 }), "w", "more than usize::MAX");
    }

    /// RoPE pairs need an even, non-zero head_dim and a `[heads · head_dim, cols]` weight.
    #[test]
    fn rope_pair_rules_are_checked() {
        let w: Vec<u32> = (0..2 * 8 * 3).collect();
        let adj = rope_pairs_adjacent(&w, HeadRows { heads: 2, head_dim: 8, cols: 3 }).unwrap();
        assert_eq!(rope_pairs_half(&adj, HeadRows { heads: 2, head_dim: 8, cols: 3 }).unwrap(), w);
        let odd: Vec<u32> = (0..2 * 7 * 3).collect();
        refused(rope_pairs_adjacent(&odd, HeadRows { heads: 2, head_dim: 7, cols: 3 }), "head_dim", "7 must be positive and even");
        refused(rope_pairs_half(&odd, HeadRows { heads: 2, head_dim: 7, cols: 3 }), "head_dim", "positive and even");
        refused(rope_pairs_adjacent(&w, HeadRows { heads: 2, head_dim: 0, cols: 3 }), "head_dim", "0 must be positive and even");
        refused(rope_pairs_adjacent(&w[1..], HeadRows { heads: 2, head_dim: 8, cols: 3 }), "w", "47 elements, must be [heads · head_dim, cols] with heads = 2, head_dim = 8, cols = 3: 48 elements");
        refused(rope_pairs_half(&w, HeadRows { heads: (1 << 61) + 2, head_dim: 8, cols: 3 }), "w", "more than usize::MAX");
    }

    /// The qkv converter names the checkpoint weight that is off.
    #[test]
    fn qkv_checkpoint_lengths_are_checked() {
        let (heads, kv, hd, d) = (4, 2, 8, 3);
        let dims = QkvDims { heads, kv_heads: kv, head_dim: hd, hidden: d };
        let wq: Vec<u32> = (0..(heads * hd * d) as u32).collect();
        let wk: Vec<u32> = (0..(kv * hd * d) as u32).collect();
        let wv = wk.clone();
        assert_eq!(qkv_from_checkpoint(&wq, &wk, &wv, dims).unwrap().len(), (heads + 2 * kv) * hd * d);
        refused(qkv_from_checkpoint(&wq[1..], &wk, &wv, dims), "wq", "must be [heads · head_dim, d]");
        refused(qkv_from_checkpoint(&wq, &wk[1..], &wv, dims), "wk", "must be [kv_heads · head_dim, d] with kv_heads = 2");
        refused(qkv_from_checkpoint(&wq, &wk, &wv[1..], dims), "wv", "must be [kv_heads · head_dim, d]");
        refused(qkv_from_checkpoint(&wq, &wk, &wv, QkvDims { head_dim: 5, ..dims }), "head_dim", "must be positive and even");
    }

    /// `qkv_to_checkpoint` undoes `qkv_from_checkpoint` and checks the length.
    #[test]
    fn qkv_round_trips() {
        let (heads, kv, hd, d) = (4, 2, 8, 3);
        let dims = QkvDims { heads, kv_heads: kv, head_dim: hd, hidden: d };
        let wq: Vec<u32> = (0..(heads * hd * d) as u32).collect();
        let wk: Vec<u32> = (1000..1000 + (kv * hd * d) as u32).collect();
        let wv: Vec<u32> = (2000..2000 + (kv * hd * d) as u32).collect();
        let w = qkv_from_checkpoint(&wq, &wk, &wv, dims).unwrap();
        assert_eq!(qkv_to_checkpoint(&w, dims).unwrap(), (wq, wk, wv));
        refused(qkv_to_checkpoint(&w[1..], dims), "w_qkv", "must be [(heads + 2·kv_heads) · head_dim, d]");
        refused(qkv_to_checkpoint(&w, QkvDims { head_dim: 3, hidden: 8, ..dims }), "head_dim", "3 must be positive and even");
    }
}
