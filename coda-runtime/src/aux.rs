//! Aux reductions: finish the per-tile partials that epilogues write.

use std::ffi::c_void;

use cudarc::driver::{DevicePtr, DevicePtrMut};

use crate::{Error, Stream, Tensor};

/// RMSNorm's inverse RMS from row-sum-of-squares partials:
/// `r[m] = rsqrt(Σ_t partials[t, m] / d + eps)`, where `partials` is a
/// `RowPartial` output `[n_tiles, m_pad]` and `r` is `[M]` f32.
pub fn rms_from_partials(
    stream: &Stream,
    partials: &Tensor<f32>,
    d: usize,
    eps: f32,
    r: &mut Tensor<f32>,
) -> Result<(), Error> {
    let [n_tiles, m_pad] = partials.shape() else {
        return Err(Error::arg("partials", format!("must be rank 2 [n_tiles, m_pad], got {:?}", partials.shape())));
    };
    let (n_tiles, m_pad) = (*n_tiles, *m_pad);
    let [m] = r.shape() else {
        return Err(Error::arg("r", format!("must be rank 1 [M], got {:?}", r.shape())));
    };
    let m = *m;
    if m == 0 || m > m_pad {
        return Err(Error::arg("r", format!("length M = {m} must be in 1..={m_pad} (the partials' rows)")));
    }
    if d == 0 || n_tiles == 0 {
        return Err(Error::arg("d", "the normalized width and the partials' tile count must be ≥ 1"));
    }
    if partials.slice().ordinal() != stream.ordinal() || r.slice().ordinal() != stream.ordinal() {
        return Err(Error::arg("partials", "tensors and stream must be on one device"));
    }
    let (pp, _g1) = partials.slice().device_ptr(stream.cuda());
    let (pr, _g2) = r.slice_mut().device_ptr_mut(stream.cuda());
    stream.cuda().context().bind_to_thread()?;
    // SAFETY: both buffers were shape-checked above and outlive the enqueue.
    let code = unsafe {
        crate::ffi::coda_rms_finish(
            pp as *const f32,
            m as i64,
            m_pad as i64,
            n_tiles as i64,
            1.0 / d as f32,
            eps,
            pr as *mut f32,
            stream.raw() as *mut c_void,
        )
    };
    if code == 0 {
        Ok(())
    } else {
        Err(Error::Kernel { kernel: "coda_rms_finish", code, message: "CUDA launch error".into() })
    }
}
