//! The bare-GEMM baseline our fused ops are measured against: cuBLASLt (the
//! path PyTorch's `F.linear` takes on Hopper), loaded at run time.

use std::sync::Arc;

use cudarc::cublaslt::{CudaBlasLT, Matmul, MatmulConfig};
use cudarc::driver::CudaStream;

use coda_llama::blas::{Stored, check_gemm};
use coda_runtime::{Error, LaunchKind, Stream, Tensor, bf16, e4m3};
use coda_runtime::dsl::ir::Accumulation;
use cudarc::driver::{DevicePtr, DevicePtrMut};

/// A cuBLASLt handle on one stream, with its 32 MiB workspace: the bare
/// GEMMs our fused ops are measured against (the path PyTorch's `F.linear`
/// takes on Hopper), algorithm from cuBLASLt's heuristic.
pub struct CublasLt {
    lt: CudaBlasLT,
    /// The stream the handle enqueues on.
    stream: Arc<CudaStream>,
}

impl CublasLt {
    pub fn new(stream: &Stream) -> Result<CublasLt, Error> {
        // SAFETY: only probes whether libcublasLt can be loaded.
        if !unsafe { cudarc::cublaslt::sys::is_culib_present() } {
            return Err(Error::Library { library: "cuBLASLt", message: "libcublasLt is not on the library path".into() });
        }
        let lt = CudaBlasLT::new(stream.cuda().clone()).map_err(|e| Error::Library { library: "cuBLASLt", message: format!("creating a handle: {e:?}") })?;
        Ok(CublasLt { lt, stream: stream.cuda().clone() })
    }

    /// `y[M, N] = x[M, K] · w[N, K]ᵀ` (a `Linear` forward), bf16 out.
    pub fn linear(&self, stream: &Stream, x: &Tensor<bf16>, w: &Tensor<bf16>, y: &mut Tensor<bf16>) -> Result<(), Error> {
        self.gemm(stream, ("x", x, Stored::Plain), ("w", w, Stored::Transposed), y)
    }

    /// `c[M, N] = a[M, K] · b[K, N]` (an input gradient `dy · W`), bf16 out.
    pub fn matmul(&self, stream: &Stream, a: &Tensor<bf16>, b: &Tensor<bf16>, c: &mut Tensor<bf16>) -> Result<(), Error> {
        self.gemm(stream, ("a", a, Stored::Plain), ("b", b, Stored::Plain), c)
    }

    fn gemm(
        &self,
        stream: &Stream,
        (an, a, sa): (&str, &Tensor<bf16>, Stored),
        (bn, b, sb): (&str, &Tensor<bf16>, Stored),
        c: &mut Tensor<bf16>,
    ) -> Result<(), Error> {
        let (m, n, k) = check_gemm(&self.stream, stream, (an, a, sa), (bn, b, sb), &*c)?;
        // Column-major as in `Cublas::gemm`: Cᵀ[N, M] = op(B)ᵀ · op(A)ᵀ.
        let cfg = MatmulConfig {
            transa: sb == Stored::Transposed,
            transb: sa == Stored::Transposed,
            transc: false,
            m: n as u64,
            n: m as u64,
            k: k as u64,
            alpha: 1.0,
            lda: b.shape()[1] as i64,
            ldb: a.shape()[1] as i64,
            beta: 0.0,
            ldc: n as i64,
            stride_a: None,
            stride_b: None,
            stride_c: None,
            stride_bias: None,
            batch_size: None,
        };
        stream.cuda().context().bind_to_thread()?;
        stream.count(LaunchKind::Blas);
        // SAFETY: the shapes checked above bound every access; all three live on the handle's stream.
        unsafe { self.lt.matmul(cfg, b.slice(), a.slice(), &mut c.view_mut(), None, None) }
            .map_err(|e| Error::Library { library: "cuBLASLt", message: format!("matmul: {e:?}") })
    }
}

/// How an FP8 GEMM's operands are scaled (cuBLASLt's `*_SCALE_MODE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fp8Scaling {
    /// One f32 per operand.
    PerTensor,
    /// `x` per 1 × 128 and `w` per 128 × 128 block (DeepSeek-V3's recipe).
    Blockwise,
}

/// cuBLASLt's FP8 GEMM `y[M, N] = (x[M, K] · w[N, K]ᵀ)` scaled, bf16 out, f32
/// accumulation with or without fast accumulation (`FAST_ACCUM`, as the
/// program's `accum` option): the baseline of the FP8 programs, through the raw API since
/// cudarc's safe wrapper has no FP8 scales. Descriptors are made once per
/// shape, as a framework caches them; the algorithm is cuBLASLt's heuristic.
pub struct CublasLtFp8 {
    handle: cudarc::cublaslt::sys::cublasLtHandle_t,
    desc: cudarc::cublaslt::sys::cublasLtMatmulDesc_t,
    layouts: [cudarc::cublaslt::sys::cublasLtMatrixLayout_t; 3],
    algo: cudarc::cublaslt::sys::cublasLtMatmulAlgo_t,
    workspace: cudarc::driver::CudaSlice<u8>,
    /// Scales of the operands (ones, sized for either scaling), whose
    /// addresses `desc` holds: owned here so they outlive it.
    _scales: [Tensor<f32>; 2],
    shape: (usize, usize, usize),
}

impl CublasLtFp8 {
    /// [`Error::Library`] where cuBLASLt has no kernel for `scaling` (e.g. blockwise before cuBLAS 12.9).
    pub fn new(stream: &Stream, (m, n, k): (usize, usize, usize), scaling: Fp8Scaling, accum: Accumulation) -> Result<CublasLtFp8, Error> {
        use cudarc::cublaslt::{result, sys};
        let lib = |what: &str, e: cudarc::cublaslt::result::CublasError| Error::Library { library: "cuBLASLt", message: format!("{what}: {e:?}") };
        // SAFETY: only probes whether libcublasLt can be loaded.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::Library { library: "cuBLASLt", message: "libcublasLt is not on the library path".into() });
        }
        stream.cuda().context().bind_to_thread()?;
        let handle = result::create_handle().map_err(|e| lib("handle", e))?;
        let desc = result::create_matmul_desc(sys::cublasComputeType_t::CUBLAS_COMPUTE_32F, sys::cudaDataType_t::CUDA_R_32F)
            .map_err(|e| lib("descriptor", e))?;
        // Column-major as in `CublasLt::gemm`: yᵀ[N, M] = w[N, K] · xᵀ, cuBLASLt's A = w (transposed), B = x.
        let (kb, nb, mb) = (k.div_ceil(128), n.div_ceil(128), m.div_ceil(128));
        let (scale_w, scale_x) = match scaling {
            Fp8Scaling::PerTensor => (Tensor::from_host(stream, &[1f32], &[1])?, Tensor::from_host(stream, &[1f32], &[1])?),
            Fp8Scaling::Blockwise => {
                // Sized for either operand order and padding cuBLASLt may read.
                let big = kb * (mb * 128).max(nb * 128);
                (Tensor::from_host(stream, &vec![1f32; big], &[big])?, Tensor::from_host(stream, &vec![1f32; big], &[big])?)
            }
        };
        let set = |attr: sys::cublasLtMatmulDescAttributes_t, ptr: *const std::ffi::c_void, size: usize| {
            // SAFETY: `desc` is live; `ptr` points at `size` bytes of the attribute's type.
            unsafe { result::set_matmul_desc_attribute(desc, attr, ptr, size) }.map_err(|e| lib("descriptor attribute", e))
        };
        // cublasOperation_t: 1 is CUBLAS_OP_T.
        let t = 1i32;
        set(sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA, &t as *const _ as _, 4)?;
        let (pw, px) = (scale_w.slice().device_ptr(stream.cuda()).0, scale_x.slice().device_ptr(stream.cuda()).0);
        set(sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &pw as *const _ as _, 8)?;
        set(sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &px as *const _ as _, 8)?;
        if accum == Accumulation::Fast {
            let fast = 1i8;
            set(sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast as *const _ as _, 1)?;
        }
        if scaling == Fp8Scaling::Blockwise {
            let (mode_w, mode_x) = (
                sys::cublasLtMatmulMatrixScale_t::CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F,
                sys::cublasLtMatmulMatrixScale_t::CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
            );
            set(sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode_w as *const _ as _, 4)?;
            set(sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode_x as *const _ as _, 4)?;
        }
        let layout = |ty, rows: usize, cols: usize| result::create_matrix_layout(ty, rows as u64, cols as u64, rows as i64).map_err(|e| lib("layout", e));
        let layouts = [
            layout(sys::cudaDataType_t::CUDA_R_8F_E4M3, k, n)?,
            layout(sys::cudaDataType_t::CUDA_R_8F_E4M3, k, m)?,
            layout(sys::cudaDataType_t::CUDA_R_16BF, n, m)?,
        ];
        let workspace = stream.cuda().alloc_zeros::<u8>(32 << 20)?;
        let pref = result::create_matmul_pref().map_err(|e| lib("preference", e))?;
        let size: usize = 32 << 20;
        // SAFETY: `pref` is live; the attribute is a size_t.
        unsafe {
            result::set_matmul_pref_attribute(
                pref,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &size as *const _ as _,
                8,
            )
        }
        .map_err(|e| lib("preference", e))?;
        // SAFETY: every descriptor above is live.
        let found = unsafe { result::get_matmul_algo_heuristic(handle, desc, layouts[0], layouts[1], layouts[2], layouts[2], pref) };
        // SAFETY: created above, used no more.
        unsafe { result::destroy_matmul_pref(pref) }.map_err(|e| lib("preference", e))?;
        let algo = found.map_err(|e| lib(&format!("no FP8 kernel for {scaling:?}, {accum:?} accumulation, at {m}×{n}×{k}"), e))?.algo;
        Ok(CublasLtFp8 { handle, desc, layouts, algo, workspace, _scales: [scale_w, scale_x], shape: (m, n, k) })
    }

    /// One GEMM of `x` `[M, K]` and `w` `[N, K]` into `y` `[M, N]`, the shape [`CublasLtFp8::new`] was made for.
    pub fn linear(&mut self, stream: &Stream, x: &Tensor<e4m3>, w: &Tensor<e4m3>, y: &mut Tensor<bf16>) -> Result<(), Error> {
        use cudarc::cublaslt::result;
        let (m, n, k) = self.shape;
        if x.shape() != [m, k] || w.shape() != [n, k] || y.shape() != [m, n] {
            return Err(Error::arg("x", format!("shapes {:?}, {:?}, {:?} are not the {m}×{n}×{k} this GEMM was made for", x.shape(), w.shape(), y.shape())));
        }
        let (alpha, beta) = (1f32, 0f32);
        let s = stream.cuda();
        let (px, _gx) = x.slice().device_ptr(s);
        let (pw, _gw) = w.slice().device_ptr(s);
        let mut yv = y.view_mut();
        let (py, _gy) = yv.device_ptr_mut(s);
        let (pws, _gws) = self.workspace.device_ptr_mut(s);
        stream.count(LaunchKind::Blas);
        // SAFETY: the shapes checked above bound every access; all live on `stream`.
        unsafe {
            result::matmul(
                self.handle,
                self.desc,
                &alpha as *const _ as _,
                &beta as *const _ as _,
                pw as _,
                self.layouts[0],
                px as _,
                self.layouts[1],
                py as _,
                self.layouts[2],
                py as _,
                self.layouts[2],
                &self.algo,
                pws as _,
                32 << 20,
                s.cu_stream() as _,
            )
        }
        .map_err(|e| Error::Library { library: "cuBLASLt", message: format!("FP8 matmul: {e:?}") })
    }
}

impl Drop for CublasLtFp8 {
    fn drop(&mut self) {
        use cudarc::cublaslt::result;
        // SAFETY: created in `new`, dropped once; errors at teardown have no one to report to.
        unsafe {
            for l in self.layouts {
                let _ = result::destroy_matrix_layout(l);
            }
            let _ = result::destroy_matmul_desc(self.desc);
            let _ = result::destroy_handle(self.handle);
        }
    }
}
