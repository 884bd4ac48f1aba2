//! The C ABI of generated launchers; mirrors `cutlass-templates/include/coda/launch.h`.

use std::ffi::{c_char, c_void};

#[repr(C)]
pub struct GemmLaunch {
    pub m: i64,
    pub n: i64,
    pub k: i64,
    pub a: *const c_void,
    pub b: *const c_void,
    /// Blockwise-scaled 8-bit operands only, else null.
    pub a_scale: *const c_void,
    pub b_scale: *const c_void,
    pub tensors: *const *mut c_void,
    pub scalars: *const f32,
    pub workspace: *mut c_void,
    pub workspace_bytes: usize,
    pub device_id: i32,
    pub sm_count: i32,
    pub swizzle: i32,
    pub raster: i32,
    pub stream: *mut c_void,
    pub message: [c_char; 256],
}

pub type RunFn = unsafe extern "C" fn(*mut GemmLaunch) -> i32;
pub type WorkspaceFn = unsafe extern "C" fn(*mut GemmLaunch, *mut usize) -> i32;

impl GemmLaunch {
    pub fn message(&self) -> String {
        let bytes: Vec<u8> = self.message.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

unsafe extern "C" {
    /// The CUDA runtime's (the static one every CODA crate links): reads
    /// and clears this thread's pending error.
    pub fn cudaGetLastError() -> i32;
    pub fn coda_rms_finish(
        partials: *const f32,
        m: i64,
        m_pad: i64,
        n_tiles: i64,
        inv_d: f32,
        eps: f32,
        r: *mut f32,
        stream: *mut c_void,
    ) -> i32;
    pub fn coda_row_sum_finish(
        partials: *const f32,
        m: i64,
        m_pad: i64,
        n_tiles: i64,
        scale: f32,
        out: *mut f32,
        stream: *mut c_void,
    ) -> i32;
    pub fn coda_col_sum_finish(
        partials: *const f32,
        n: i64,
        n_pad: i64,
        m_tiles: i64,
        accumulate: i32,
        out: *mut f32,
        stream: *mut c_void,
    ) -> i32;
    pub fn coda_max_finish(partials: *const f32, n: i64, pitch: i64, tiles: i64, out: *mut f32, stream: *mut c_void) -> i32;
    pub fn coda_max_all_finish(partials: *const f32, n: i64, pitch: i64, tiles: i64, out: *mut f32, stream: *mut c_void) -> i32;
    pub fn coda_col_group_sum_finish(
        partials: *const f32,
        n_pad: i64,
        m_tiles: i64,
        first: i64,
        groups: i64,
        g: i64,
        accumulate: i32,
        out: *mut f32,
        stream: *mut c_void,
    ) -> i32;
    pub fn coda_scale_into(src: *const c_void, src_bf16: i32, g: *const f32, dst: *mut c_void, dst_bf16: i32, n: i64, stream: *mut c_void) -> i32;
    pub fn coda_repeat_two_bf16(
        a: *const c_void,
        na: i64,
        ta: i64,
        b: *const c_void,
        nb: i64,
        tb: i64,
        out: *mut c_void,
        n: i64,
        stream: *mut c_void,
    ) -> i32;
    pub fn coda_lse_finish(partials: *const f32, m: i64, m_pad: i64, n_tiles: i64, lse: *mut f32, stream: *mut c_void) -> i32;
    pub fn coda_cross_entropy_finish(
        lse: *const f32,
        target_logit: *const f32,
        row_sum: *const f32,
        target: *const i32,
        m: i64,
        n: i64,
        w_target: f32,
        w_sum: f32,
        w_lse_squared: f32,
        loss: *mut f32,
        mean: *mut f32,
        stream: *mut c_void,
    ) -> i32;
    pub fn coda_cross_entropy_row_weights(target: *const i32, m: i64, n: i64, w: *mut f32, stream: *mut c_void) -> i32;
}
