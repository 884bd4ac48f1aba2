//! DLPack (through the `dlpark` crate): tensors handed to other frameworks
//! and taken from them without a copy. Export moves a [`Tensor`] into a
//! versioned DLPack tensor whose deleter frees it; import borrows any DLPack
//! tensor on the launch stream's device as a [`RawTensor`].

use std::ffi::c_void;

use cudarc::driver::DevicePtr;
use dlpark::ffi::{DLDevice, DLDeviceType};
use dlpark::metadata::Dynamic;
use dlpark::{DlpackElement, DlpackFlags, Managed, ManagedTensorBase, versioned};

use dlpark::ffi::{DLDataType, DLDataTypeCode};

use crate::tensor::{Element, Tensor};
use crate::{Error, RawTensor, Stream};

impl<T: Element + DlpackElement + Send> Tensor<T> {
    /// This tensor as a versioned DLPack tensor (for `torch.from_dlpack` and
    /// the like), owning it. The data is ready on this tensor's stream (see
    /// [`Tensor::slice`]): a consumer keeps working on that stream or waits
    /// for it. The DLPack deleter waits for the device (a consumer may have
    /// queued work on any stream) and then frees the memory.
    pub fn into_dlpack(self) -> Result<versioned::Dlpack, Error> {
        let device = i32::try_from(self.slice().ordinal())
            .map_err(|_| Error::arg("tensor", "device ordinal past i32::MAX"))?;
        let address = self.slice().device_ptr(self.slice().stream()).0;
        // Dimensions fit: the allocation's byte size is ≤ isize::MAX.
        let shape: Vec<i64> = self.shape().iter().map(|&d| d as i64).collect();
        let mut tensor = Dynamic::compact(shape)
            .initialize(Box::new(Exported(std::mem::ManuallyDrop::new(self))))
            .map_err(|e| Error::arg("tensor", format!("no DLPack descriptor: {e}")))?;
        tensor.set_device(DLDevice::cuda(device)).set_dtype(<T as DlpackElement>::DTYPE).set_data(address as *mut c_void);
        // SAFETY: data, device and dtype describe the boxed tensor the DLPack context now owns.
        Ok(unsafe { tensor.finish() })
    }
}

/// An exported tensor, owned by its DLPack descriptor.
struct Exported<T: Element>(std::mem::ManuallyDrop<Tensor<T>>);

impl<T: Element> Drop for Exported<T> {
    /// The consumer's last kernels may still read the memory, on a stream
    /// cudarc's events do not know: wait for the whole device before the
    /// free. A deleter cannot report errors: if the wait fails, the memory
    /// is leaked rather than freed under a running kernel.
    fn drop(&mut self) {
        let ctx = self.0.slice().context().clone();
        if ctx.bind_to_thread().and_then(|()| ctx.synchronize()).is_ok() {
            // SAFETY: dropped once, here; never used again.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.0) };
        }
    }
}

impl<'a, T: Element + DlpackElement> RawTensor<'a, T> {
    /// A DLPack tensor (e.g. from `t.__dlpack__(stream=...)`) as a launch
    /// argument on `stream`: it must be a CUDA tensor of the stream's device
    /// with element type `T`, writable (a read-only one is refused: a
    /// `RawTensor` may be an output), then checked as by [`RawTensor::new`]
    /// (dense row-major strides, device memory in one allocation).
    ///
    /// # Safety
    /// As for [`RawTensor::new`]: the data is ready on `stream` (for a Python
    /// producer: `stream` was the one passed to `__dlpack__`) and, for `'a`,
    /// is used only in the order of work on `stream`.
    pub unsafe fn from_dlpack<M: ManagedTensorBase>(stream: &Stream, tensor: &'a Managed<M>) -> Result<Self, Error> {
        let bad = |rule: String| Error::arg("tensor", rule);
        let t = tensor.validate().map_err(|e| bad(format!("not a valid DLPack tensor: {e}")))?;
        let (device, ordinal) = (t.device(), stream.ordinal());
        if device.device_type != DLDeviceType::CUDA || usize::try_from(device.device_id).ok() != Some(ordinal) {
            return Err(bad(format!("is on {device:?}; the stream is on CUDA device {ordinal}")));
        }
        if t.dtype() != <T as DlpackElement>::DTYPE {
            return Err(bad(format!("has dtype {}, the argument needs {}", dtype_name(t.dtype()), dtype_name(<T as DlpackElement>::DTYPE))));
        }
        if tensor.flags().contains(DlpackFlags::READ_ONLY) {
            return Err(bad("is read-only (DLPack flag)".into()));
        }
        // Validated: dimensions are non-negative and the element count fits.
        let shape: Vec<usize> = t.shape().iter().map(|&d| d as usize).collect();
        let strides = t.strides_or_compact().map_err(|e| bad(format!("strides: {e}")))?;
        let strides: Vec<isize> = strides.iter().map(|&s| s as isize).collect();
        let address = (t.data_ptr() as u64)
            .checked_add(t.byte_offset())
            .ok_or_else(|| bad("data pointer plus byte offset overflows".into()))?;
        // SAFETY: the caller's promise, for memory `tensor` keeps alive for 'a.
        unsafe { RawTensor::new(stream, address, &shape, &strides) }
    }
}

/// A DLPack dtype as PyTorch spells it (`bfloat16`, `float32`, ...).
fn dtype_name(t: DLDataType) -> String {
    let kind = match t.code {
        DLDataTypeCode::INT => "int",
        DLDataTypeCode::UINT => "uint",
        DLDataTypeCode::FLOAT => "float",
        DLDataTypeCode::BFLOAT => "bfloat",
        _ => return format!("{t:?}"),
    };
    if t.lanes == 1 { format!("{kind}{}", t.bits) } else { format!("{kind}{}x{}", t.bits, t.lanes) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtypes_are_named_as_pytorch_does() {
        assert_eq!(dtype_name(<half::bf16 as DlpackElement>::DTYPE), "bfloat16");
        assert_eq!(dtype_name(<f32 as DlpackElement>::DTYPE), "float32");
        assert_eq!(dtype_name(<i32 as DlpackElement>::DTYPE), "int32");
    }
}
