//! Device memory that other libraries own, borrowed as launch arguments
//! without a copy: cudarc views (candle's storage, any `CudaSlice`) and,
//! with `unsafe`, raw device pointers with a shape and strides (PyTorch's
//! `data_ptr()`, a DLPack tensor).

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop, sys};

use crate::dsl::ir::DType;
use crate::tensor::{AnyTensor, AnyTensorMut, Element, RowSlices, TensorMut, TensorRef, checked_len, span_bytes};
use crate::{Error, Stream};

/// A cudarc view (of a `CudaSlice`: `slice.as_view()`, `slice.slice(a..b)`)
/// as a dense row-major input of `shape`. Launches order it like a
/// [`crate::Tensor`]: it must live on the launch stream, and its reads are
/// recorded on the slice's events.
pub struct TensorView<'a, T: Element> {
    data: CudaView<'a, T>,
    shape: Vec<usize>,
}

/// A cudarc mutable view as a dense row-major output of `shape`.
pub struct TensorViewMut<'a, T: Element> {
    data: CudaViewMut<'a, T>,
    shape: Vec<usize>,
}

/// `len` elements hold exactly a tensor of `shape`.
fn exact_shape<T>(len: usize, shape: &[usize]) -> Result<Vec<usize>, Error> {
    let want = checked_len::<T>(shape)?;
    if len != want {
        return Err(Error::arg("shape", format!("{shape:?} needs {want} elements; the view has {len}")));
    }
    Ok(shape.to_vec())
}

impl<'a, T: Element> TensorView<'a, T> {
    pub fn new(data: CudaView<'a, T>, shape: &[usize]) -> Result<Self, Error> {
        Ok(TensorView { shape: exact_shape::<T>(data.len(), shape)?, data })
    }
}

impl<'a, T: Element> TensorViewMut<'a, T> {
    pub fn new(data: CudaViewMut<'a, T>, shape: &[usize]) -> Result<Self, Error> {
        Ok(TensorViewMut { shape: exact_shape::<T>(data.len(), shape)?, data })
    }
}

/// Raw device memory borrowed for `'a` as a dense row-major tensor, an input
/// or an output, used on one [`Stream`] (see [`RawTensor::new`]).
pub struct RawTensor<'a, T: Element> {
    address: u64,
    shape: Vec<usize>,
    stream: Arc<CudaStream>,
    ordinal: usize,
    _borrow: std::marker::PhantomData<&'a mut [T]>,
}

impl<'a, T: Element> RawTensor<'a, T> {
    /// `shape` elements of `T` at device address `address`, with `strides`
    /// in elements as PyTorch and DLPack give them (each dimension's stride
    /// must be that of a dense row-major tensor; a dimension of size 1 may
    /// have any stride). The driver is asked where the memory is: it must be
    /// device memory on `stream`'s device, the span must lie inside the
    /// address range of one allocation, and its last byte must be mapped.
    /// That catches foreign pointers and most overruns, not all: a caching
    /// allocator's range is its whole segment, which holds other tensors.
    /// `address` must be aligned for `T` (finishers and cuBLAS take any such
    /// tensor). Other checks (a fused launch's 16-byte alignment, an output
    /// overlapping another argument of the same launch or finisher) come at
    /// launch, as for every tensor; an output overlapping a tensor of another launch of an op is
    /// not seen there, which is why the safety contract below asks for it.
    ///
    /// # Safety
    /// The span holds `T`s. It stays allocated, and is neither reused nor
    /// used except in the order of work on `stream`, until every launch made
    /// through this tensor has finished (launches are asynchronous: that can
    /// be after `'a` ends; nothing records events for raw memory). Used as an
    /// output, nothing else reads or writes it until then.
    pub unsafe fn new(stream: &Stream, address: u64, shape: &[usize], strides: &[isize]) -> Result<Self, Error> {
        let len = dense_len::<T>(shape, strides)?;
        aligned::<T>(address)?;
        let bytes = span_bytes::<T>(shape) as u64;
        if len > 0 {
            check_allocation(stream, address, bytes)?;
        }
        Ok(RawTensor {
            address,
            shape: shape.to_vec(),
            stream: stream.cuda().clone(),
            ordinal: stream.ordinal(),
            _borrow: std::marker::PhantomData,
        })
    }
}

/// `address` is aligned for `T`.
fn aligned<T>(address: u64) -> Result<(), Error> {
    let align = std::mem::align_of::<T>() as u64;
    match address % align {
        0 => Ok(()),
        _ => Err(Error::arg("address", format!("{address:#x} is not aligned to the {align} bytes of its elements"))),
    }
}

/// The element count of a dense row-major `shape` with these `strides` (in
/// elements; a dimension of size 1 may have any stride, as in PyTorch).
fn dense_len<T>(shape: &[usize], strides: &[isize]) -> Result<usize, Error> {
    let len = checked_len::<T>(shape)?;
    if strides.len() != shape.len() {
        return Err(Error::arg("strides", format!("{} strides for the {} dimensions of {shape:?}", strides.len(), shape.len())));
    }
    let mut dense = 1usize;
    for (d, (&size, &stride)) in shape.iter().zip(strides).enumerate().rev() {
        if size != 1 && usize::try_from(stride).ok() != Some(dense) {
            return Err(Error::arg(
                "strides",
                format!("{strides:?} for shape {shape:?}: dimension {d} has stride {stride}, a dense row-major tensor {dense}"),
            ));
        }
        // Beside a zero-sized dimension the others' product can overflow.
        dense = dense.checked_mul(size).ok_or_else(|| Error::arg("shape", format!("{shape:?}: the sizes' product overflows")))?;
    }
    Ok(len)
}

/// One pointer attribute of `address`.
fn attribute<V: Default>(address: u64, attribute: sys::CUpointer_attribute) -> Result<V, sys::CUresult> {
    let mut value = V::default();
    // SAFETY: `value` is the type the driver writes for each attribute asked below.
    unsafe { sys::cuPointerGetAttribute(&mut value as *mut V as *mut std::ffi::c_void, attribute, address) }.result()
        .map_err(|e| e.0)?;
    Ok(value)
}

/// `bytes` at `address` are device memory of `stream`'s device, in one allocation.
fn check_allocation(stream: &Stream, address: u64, bytes: u64) -> Result<(), Error> {
    use sys::CUpointer_attribute::*;
    stream.cuda().context().bind_to_thread()?;
    let not_device = |why: String| Error::arg("address", format!("{address:#x} is not device memory of this device: {why}"));
    let kind: u32 = attribute(address, CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
        .map_err(|e| not_device(format!("the driver does not know it ({e:?})")))?;
    if kind != sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32 {
        return Err(not_device(format!("its memory type is {kind} (device memory is {})", sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32)));
    }
    let ordinal: i32 = attribute(address, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL).map_err(|e| not_device(format!("{e:?}")))?;
    if usize::try_from(ordinal).ok() != Some(stream.ordinal()) {
        return Err(Error::arg("address", format!("{address:#x} is on device {ordinal}, the stream on device {}", stream.ordinal())));
    }
    let start: u64 = attribute(address, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR).map_err(|e| not_device(format!("{e:?}")))?;
    let size: usize = attribute(address, CU_POINTER_ATTRIBUTE_RANGE_SIZE).map_err(|e| not_device(format!("{e:?}")))?;
    let end = start.saturating_add(size as u64);
    if address.checked_add(bytes).is_none_or(|last| last > end) {
        return Err(Error::arg(
            "shape",
            format!("{bytes} bytes at {address:#x} run past its allocation ({size} bytes at {start:#x})"),
        ));
    }
    // Virtual-memory-managed ranges (PyTorch's expandable segments) may be partly unmapped.
    let last = address + bytes - 1;
    let mapped: u32 = attribute(last, CU_POINTER_ATTRIBUTE_MAPPED).map_err(|e| not_device(format!("{e:?}")))?;
    if mapped == 0 {
        return Err(Error::arg("shape", format!("{bytes} bytes at {address:#x}: the last byte is not mapped")));
    }
    Ok(())
}

mod sealed_impls {
    use super::*;
    impl<T: Element> crate::tensor::sealed::Sealed for TensorView<'_, T> {}
    impl<T: Element> crate::tensor::sealed::Sealed for TensorViewMut<'_, T> {}
    impl<T: Element> crate::tensor::sealed::Sealed for RawTensor<'_, T> {}
}

impl<T: Element> TensorRef<T> for TensorView<'_, T> {}
impl<T: Element> TensorRef<T> for TensorViewMut<'_, T> {}
impl<T: Element> TensorMut<T> for TensorViewMut<'_, T> {}
impl<T: Element> TensorRef<T> for RawTensor<'_, T> {}
impl<T: Element> TensorMut<T> for RawTensor<'_, T> {}

macro_rules! view_any_tensor {
    ($ty:ident) => {
        impl<T: Element> AnyTensor for $ty<'_, T> {
            fn dtype(&self) -> DType {
                T::DTYPE
            }
            fn dims(&self) -> &[usize] {
                &self.shape
            }
            fn bytes(&self) -> usize {
                self.data.num_bytes()
            }
            fn ordinal(&self) -> usize {
                self.data.stream().context().ordinal()
            }
            fn on_stream(&self, stream: &Stream) -> bool {
                Arc::ptr_eq(self.data.stream(), stream.cuda())
            }
            fn read_ptr<'s>(&'s self, stream: &'s Stream) -> (u64, SyncOnDrop<'s>) {
                self.data.device_ptr(stream.cuda())
            }
        }
    };
}
view_any_tensor!(TensorView);
view_any_tensor!(TensorViewMut);

impl<T: Element> AnyTensorMut for TensorViewMut<'_, T> {
    fn write_ptr<'s>(&'s mut self, stream: &'s Stream) -> (u64, SyncOnDrop<'s>) {
        self.data.device_ptr_mut(stream.cuda())
    }
    fn as_any(&self) -> &dyn AnyTensor {
        self
    }
}

impl<T: Element> RawTensor<'_, T> {
    /// Rows `range` of the same memory, borrowed from `self` (the caller's
    /// promise covers every part of the span it made).
    fn sub_rows(&self, range: Range<usize>) -> Result<RawTensor<'_, T>, Error> {
        let (start, shape) = crate::tensor::row_range(&self.shape, &range)?;
        Ok(RawTensor {
            // Within the span `new` checked, so no overflow.
            address: self.address + (start * std::mem::size_of::<T>()) as u64,
            shape,
            stream: self.stream.clone(),
            ordinal: self.ordinal,
            _borrow: std::marker::PhantomData,
        })
    }
}

// Shared rows are handed out as inputs only (the opaque type hides that a
// `RawTensor` could be written); writable rows need `&mut self`.
impl<T: Element> RowSlices<T> for RawTensor<'_, T> {
    fn row_slice(&self, range: Range<usize>) -> Result<impl TensorRef<T> + '_, Error> {
        self.sub_rows(range)
    }
    fn row_slice_mut(&mut self, range: Range<usize>) -> Result<impl TensorMut<T> + '_, Error> {
        self.sub_rows(range)
    }
}

impl<T: Element> AnyTensor for RawTensor<'_, T> {
    fn dtype(&self) -> DType {
        T::DTYPE
    }
    fn dims(&self) -> &[usize] {
        &self.shape
    }
    fn bytes(&self) -> usize {
        span_bytes::<T>(&self.shape) // checked in `new`
    }
    fn ordinal(&self) -> usize {
        self.ordinal
    }
    fn on_stream(&self, stream: &Stream) -> bool {
        Arc::ptr_eq(&self.stream, stream.cuda())
    }
    /// No events: the caller orders all use of the memory on its stream.
    fn read_ptr<'s>(&'s self, _stream: &'s Stream) -> (u64, SyncOnDrop<'s>) {
        (self.address, SyncOnDrop::Record(None))
    }
}

impl<T: Element> AnyTensorMut for RawTensor<'_, T> {
    fn write_ptr<'s>(&'s mut self, _stream: &'s Stream) -> (u64, SyncOnDrop<'s>) {
        (self.address, SyncOnDrop::Record(None))
    }
    fn as_any(&self) -> &dyn AnyTensor {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Raw memory must be dense row-major (size-1 dimensions excepted) and a
    /// view must hold exactly its shape; both checked before the driver is asked.
    #[test]
    fn layouts_must_be_dense_row_major() {
        assert_eq!(dense_len::<f32>(&[4, 6], &[6, 1]).unwrap(), 24);
        assert_eq!(dense_len::<f32>(&[1, 6], &[99, 1]).unwrap(), 6, "a size-1 dimension's stride is free");
        assert_eq!(dense_len::<f32>(&[0, 6], &[6, 1]).unwrap(), 0);
        for (shape, strides) in [(&[4, 6][..], &[1, 4][..]), (&[4, 6], &[12, 2]), (&[4, 6], &[6, -1]), (&[4, 6], &[6])] {
            match dense_len::<f32>(shape, strides) {
                Err(Error::Arg { name, .. }) => assert_eq!(name, "strides"),
                other => panic!("{shape:?} {strides:?}: {other:?}"),
            }
        }
        assert!(dense_len::<f32>(&[1 << 62, 4], &[4, 1]).is_err(), "sizes never wrap");
        // No element, but the strides' products overflow: an error, not a panic.
        let r = dense_len::<f32>(&[0, 1 << 40, 1 << 40], &[1 << 62, 1 << 40, 1]);
        assert!(matches!(&r, Err(Error::Arg { name, .. }) if name == "shape"), "{r:?}");
        assert!(aligned::<f32>(0x1000).is_ok() && aligned::<half::bf16>(0x1002).is_ok());
        let r = aligned::<f32>(0x1002);
        assert!(matches!(&r, Err(Error::Arg { name, .. }) if name == "address"), "{r:?}");
        assert!(exact_shape::<f32>(6, &[2, 3]).is_ok());
        assert!(matches!(exact_shape::<f32>(5, &[2, 3]), Err(Error::Arg { name, .. }) if name == "shape"));
    }
}
