//! Aux reductions: finish the per-tile partials that epilogues write. Each is
//! one small deterministic kernel (fixed summation order, no atomics) on the
//! stream, reading only the partials, never a full activation.

use crate::{AnyTensor, Element, Error, Stream, TensorMut, TensorRef};

fn rank2(name: &str, t: &dyn AnyTensor, what: &str) -> Result<(usize, usize), Error> {
    match *t.dims() {
        [a, b] if a > 0 && b > 0 => Ok((a, b)),
        _ => Err(Error::arg(name, format!("must be {what}, got shape {:?}", t.dims()))),
    }
}

fn len(t: &dyn AnyTensor) -> usize {
    t.dims().iter().product()
}

fn vector(name: &str, t: &dyn AnyTensor, len: usize) -> Result<(), Error> {
    if t.dims() == [len] {
        Ok(())
    } else {
        Err(Error::arg(name, format!("must be [{len}], got shape {:?}", t.dims())))
    }
}

fn same_stream(stream: &Stream, name: &str, t: &dyn AnyTensor) -> Result<(), Error> {
    if t.on_stream(stream) {
        Ok(())
    } else {
        Err(Error::arg(name, "was allocated on another stream; use tensors of the launch stream"))
    }
}

fn ptr<T: Element>(stream: &Stream, t: &dyn TensorRef<T>) -> *const T {
    t.address(stream) as *const T
}

fn ptr_mut<T: Element>(stream: &Stream, t: &mut dyn TensorMut<T>) -> *mut T {
    t.address(stream) as *mut T
}

fn launched(stream: &Stream, kernel: &'static str, code: i32) -> Result<(), Error> {
    stream.count(crate::stream::LaunchKind::Aux);
    if code == 0 { Ok(()) } else { Err(Error::Kernel { kernel, code, message: "CUDA launch error".into() }) }
}

/// The rows `M` a `[n_tiles, m_pad]` row-partials tensor is finished for, checked against `out` `[M]`.
fn row_partials(partials: &dyn AnyTensor, out_name: &str, m: usize) -> Result<(usize, usize), Error> {
    let (n_tiles, m_pad) = rank2("partials", partials, "[n_tiles, m_pad] row partials")?;
    if m == 0 || m > m_pad {
        return Err(Error::arg(out_name, format!("length M = {m} must be in 1..={m_pad} (the partials' rows)")));
    }
    Ok((n_tiles, m_pad))
}

/// RMSNorm's inverse RMS from row-sum-of-squares partials:
/// `r[m] = rsqrt(Σ_t partials[t, m] / d + eps)`; `partials` is a `RowPartial`
/// output `[n_tiles, m_pad]` and `r` is `[M]`.
pub fn rms_from_partials(stream: &Stream, partials: &dyn TensorRef<f32>, d: usize, eps: f32, r: &mut dyn TensorMut<f32>) -> Result<(), Error> {
    let m = len(r);
    vector("r", r, m)?;
    let (n_tiles, m_pad) = row_partials(partials, "r", m)?;
    if d == 0 {
        return Err(Error::arg("d", "the normalized width must be ≥ 1"));
    }
    same_stream(stream, "partials", partials)?;
    same_stream(stream, "r", r)?;
    stream.cuda().context().bind_to_thread()?;
    let (p, o) = (ptr(stream, partials), ptr_mut(stream, r));
    // SAFETY: shapes checked above; both buffers outlive the enqueue on their own stream.
    let code = unsafe {
        crate::ffi::coda_rms_finish(p, m as i64, m_pad as i64, n_tiles as i64, 1.0 / d as f32, eps, o, stream.raw())
    };
    launched(stream, "coda_rms_finish", code)
}

/// Plain row sums: `out[m] = scale · Σ_t partials[t, m]` (e.g. `s = (1/d) Σ dy ⊙ y`).
pub fn row_sums(stream: &Stream, partials: &dyn TensorRef<f32>, scale: f32, out: &mut dyn TensorMut<f32>) -> Result<(), Error> {
    let m = len(out);
    vector("out", out, m)?;
    let (n_tiles, m_pad) = row_partials(partials, "out", m)?;
    same_stream(stream, "partials", partials)?;
    same_stream(stream, "out", out)?;
    stream.cuda().context().bind_to_thread()?;
    let (p, o) = (ptr(stream, partials), ptr_mut(stream, out));
    // SAFETY: shapes checked above.
    let code =
        unsafe { crate::ffi::coda_row_sum_finish(p, m as i64, m_pad as i64, n_tiles as i64, scale, o, stream.raw()) };
    launched(stream, "coda_row_sum_finish", code)
}

/// Column sums over M-tiles: `out[n] = Σ_t partials[t, n]`, from a `ColPartial`
/// output `[m_tiles, n_pad]` (e.g. `dγ`); `out` is `[N]`.
pub fn col_sums(stream: &Stream, partials: &dyn TensorRef<f32>, out: &mut dyn TensorMut<f32>) -> Result<(), Error> {
    let (m_tiles, n_pad) = rank2("partials", partials, "[m_tiles, n_pad] column partials")?;
    let n = len(out);
    if n == 0 || n > n_pad || out.dims() != [n] {
        return Err(Error::arg("out", format!("must be [N] with 1 ≤ N ≤ {n_pad}, got shape {:?}", out.dims())));
    }
    same_stream(stream, "partials", partials)?;
    same_stream(stream, "out", out)?;
    stream.cuda().context().bind_to_thread()?;
    let (p, o) = (ptr(stream, partials), ptr_mut(stream, out));
    // SAFETY: shapes checked above.
    let code = unsafe { crate::ffi::coda_col_sum_finish(p, n as i64, n_pad as i64, m_tiles as i64, o, stream.raw()) };
    launched(stream, "coda_col_sum_finish", code)
}

/// Log-sum-exp per row from `LsePartial` output `[2, n_tiles, m_pad]`; `lse` is `[M]`.
pub fn lse_from_partials(stream: &Stream, partials: &dyn TensorRef<f32>, lse: &mut dyn TensorMut<f32>) -> Result<(), Error> {
    let m = len(lse);
    vector("lse", lse, m)?;
    let (n_tiles, m_pad) = match *partials.dims() {
        [2, t, p] if t > 0 && p > 0 => (t, p),
        _ => return Err(Error::arg("partials", format!("must be [2, n_tiles, m_pad], got shape {:?}", partials.dims()))),
    };
    if m == 0 || m > m_pad {
        return Err(Error::arg("lse", format!("length M = {m} must be in 1..={m_pad} (the partials' rows)")));
    }
    same_stream(stream, "partials", partials)?;
    same_stream(stream, "lse", lse)?;
    stream.cuda().context().bind_to_thread()?;
    let (p, o) = (ptr(stream, partials), ptr_mut(stream, lse));
    // SAFETY: shapes checked above.
    let code = unsafe { crate::ffi::coda_lse_finish(p, m as i64, m_pad as i64, n_tiles as i64, o, stream.raw()) };
    launched(stream, "coda_lse_finish", code)
}

/// Cross-entropy from `lse` and the gathered target logits: `loss[m] = lse[m] −
/// target_logit[m]` for rows whose target is in `[0, n_classes)`, 0 for ignored
/// rows (e.g. target −100), and `mean` `[1]` over the non-ignored rows (NaN if none).
pub fn cross_entropy_loss(
    stream: &Stream,
    lse: &dyn TensorRef<f32>,
    target_logit: &dyn TensorRef<f32>,
    targets: &dyn TensorRef<i32>,
    n_classes: usize,
    loss: &mut dyn TensorMut<f32>,
    mean: &mut dyn TensorMut<f32>,
) -> Result<(), Error> {
    let m = len(lse);
    if m == 0 {
        return Err(Error::arg("lse", "must have at least one row"));
    }
    vector("lse", lse, m)?;
    vector("target_logit", target_logit, m)?;
    vector("targets", targets, m)?;
    vector("loss", loss, m)?;
    vector("mean", mean, 1)?;
    same_stream(stream, "lse", lse)?;
    same_stream(stream, "target_logit", target_logit)?;
    same_stream(stream, "targets", targets)?;
    same_stream(stream, "loss", loss)?;
    same_stream(stream, "mean", mean)?;
    stream.cuda().context().bind_to_thread()?;
    let (l, tl, t) = (ptr(stream, lse), ptr(stream, target_logit), ptr(stream, targets));
    let (lo, me) = (ptr_mut(stream, loss), ptr_mut(stream, mean));
    // SAFETY: every buffer is [M] (mean [1]), checked above.
    let code = unsafe { crate::ffi::coda_cross_entropy_finish(l, tl, t, m as i64, n_classes as i64, lo, me, stream.raw()) };
    launched(stream, "coda_cross_entropy_finish", code)
}

/// The loss gradient of each row for the mean cross-entropy: `w[m] = 1 / n_valid`
/// for rows whose target is in `[0, n_classes)`, 0 for ignored rows (`w` is `[M]`).
pub fn cross_entropy_row_weights(stream: &Stream, targets: &dyn TensorRef<i32>, n_classes: usize, w: &mut dyn TensorMut<f32>) -> Result<(), Error> {
    let m = len(targets);
    if m == 0 {
        return Err(Error::arg("targets", "must have at least one row"));
    }
    vector("targets", targets, m)?;
    vector("w", w, m)?;
    same_stream(stream, "targets", targets)?;
    same_stream(stream, "w", w)?;
    stream.cuda().context().bind_to_thread()?;
    let (t, o) = (ptr(stream, targets), ptr_mut(stream, w));
    // SAFETY: both buffers are [M], checked above.
    let code = unsafe { crate::ffi::coda_cross_entropy_row_weights(t, m as i64, n_classes as i64, o, stream.raw()) };
    launched(stream, "coda_cross_entropy_row_weights", code)
}
