//! `.npy` reading and writing: every supported dtype round trips, and what memc cannot read is
//! rejected with a message naming the file.

mod common;

use common::scratch_dir;
use memc_codegen::Scalar;
use memc_runtime::npy::{read_npy, write_npy};
use memc_runtime::{Tensor, TensorRef};
use npyz::WriterBuilder;
use std::path::Path;

fn round_trip(dir: &Path, tensor: &Tensor) {
    let path = dir.join(format!("{}.npy", tensor.name()));
    write_npy(&path, tensor.as_ref()).unwrap();
    let back = read_npy(&path).unwrap();
    assert_eq!(&back, tensor, "{}", tensor.name());
}

#[test]
fn every_dtype_round_trips() {
    let dir = scratch_dir("npy_round_trip");
    let shape = vec![2, 3];
    round_trip(
        &dir,
        &Tensor::from_slice(
            "bool",
            shape.clone(),
            &[true, false, true, true, false, false],
        )
        .unwrap(),
    );
    round_trip(
        &dir,
        &Tensor::from_slice("i8", shape.clone(), &[-128i8, -1, 0, 1, 2, 127]).unwrap(),
    );
    round_trip(
        &dir,
        &Tensor::from_slice("i16", shape.clone(), &[i16::MIN, -1, 0, 1, 2, i16::MAX]).unwrap(),
    );
    round_trip(
        &dir,
        &Tensor::from_slice("i32", shape.clone(), &[i32::MIN, -1, 0, 1, 2, i32::MAX]).unwrap(),
    );
    round_trip(
        &dir,
        &Tensor::from_slice("i64", shape.clone(), &[i64::MIN, -1, 0, 1, 2, i64::MAX]).unwrap(),
    );
    round_trip(
        &dir,
        &Tensor::from_slice("u8", shape.clone(), &[0u8, 1, 2, 3, 254, 255]).unwrap(),
    );
    round_trip(
        &dir,
        &Tensor::from_slice("u16", shape.clone(), &[0u16, 1, 2, 3, 4, u16::MAX]).unwrap(),
    );
    round_trip(
        &dir,
        &Tensor::from_slice("u32", shape.clone(), &[0u32, 1, 2, 3, 4, u32::MAX]).unwrap(),
    );
    round_trip(
        &dir,
        &Tensor::from_slice("u64", shape.clone(), &[0u64, 1, 2, 3, 4, u64::MAX]).unwrap(),
    );
    round_trip(
        &dir,
        &Tensor::from_slice(
            "f32",
            shape.clone(),
            &[-1.5f32, 0.0, 1.0, f32::INFINITY, f32::MIN_POSITIVE, 3.25],
        )
        .unwrap(),
    );
    round_trip(
        &dir,
        &Tensor::from_slice(
            "f64",
            shape.clone(),
            &[-1.5f64, 0.0, 1.0, f64::NEG_INFINITY, f64::MAX, 1e-300],
        )
        .unwrap(),
    );
    // f16 travels as raw bits: 1.0, -2.0, 0.5, inf, 0, 65504.
    let halves: Vec<u8> = [0x3c00u16, 0xc000, 0x3800, 0x7c00, 0, 0x7bff]
        .iter()
        .flat_map(|h| h.to_le_bytes())
        .collect();
    round_trip(
        &dir,
        &Tensor::new("f16", Scalar::F16, shape, halves).unwrap(),
    );
}

#[test]
fn scalars_and_empty_arrays_round_trip() {
    let dir = scratch_dir("npy_shapes");
    round_trip(
        &dir,
        &Tensor::from_slice("scalar", vec![], &[42i64]).unwrap(),
    );
    round_trip(
        &dir,
        &Tensor::from_slice("empty", vec![0], &[] as &[f32]).unwrap(),
    );
    round_trip(
        &dir,
        &Tensor::from_slice("empty2d", vec![3, 0], &[] as &[f64]).unwrap(),
    );
    round_trip(
        &dir,
        &Tensor::from_slice("rank4", vec![1, 2, 1, 2], &[1u8, 2, 3, 4]).unwrap(),
    );
}

/// A `.npy` file as `np.save` writes it (format 1.0, the header padded to 64 bytes).
fn numpy_file(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let total = (10 + dict.len() + 1).next_multiple_of(64);
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&((total - 10) as u16).to_le_bytes());
    bytes.extend_from_slice(dict.as_bytes());
    bytes.resize(total - 1, b' ');
    bytes.push(b'\n');
    bytes.extend_from_slice(data);
    bytes
}

#[test]
fn what_numpy_writes_is_read() {
    // `np.save(f, np.arange(6, dtype='<f4').reshape(2, 3))`.
    let data: Vec<u8> = (0..6).flat_map(|v| (v as f32).to_le_bytes()).collect();
    let path = scratch_dir("npy_numpy").join("arange.npy");
    std::fs::write(&path, numpy_file("<f4", "(2, 3)", &data)).unwrap();
    let tensor = read_npy(&path).unwrap();
    assert_eq!(tensor.name(), "arange");
    assert_eq!(tensor.elem(), Scalar::F32);
    assert_eq!(tensor.shape(), &[2, 3]);
    assert_eq!(
        tensor.to_vec::<f32>().unwrap(),
        [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    );
}

/// The message of reading `path`, with the directory replaced by `DIR`.
fn read_err(path: &Path) -> String {
    let dir = path.parent().unwrap().display().to_string();
    read_npy(path).unwrap_err().to_string().replace(&dir, "DIR")
}

#[test]
fn fortran_order_is_rejected() {
    let path = scratch_dir("npy_fortran").join("f.npy");
    let mut out = std::fs::File::create(&path).unwrap();
    let mut writer = npyz::WriteOptions::<f32>::new()
        .default_dtype()
        .shape(&[2, 2])
        .order(npyz::Order::Fortran)
        .writer(&mut out)
        .begin_nd()
        .unwrap();
    writer.extend([1.0, 2.0, 3.0, 4.0]).unwrap();
    writer.finish().unwrap();
    assert_eq!(
        read_err(&path),
        "`DIR/f.npy`: the array is in Fortran order; memc reads C order (in NumPy: `np.ascontiguousarray(a)`)"
    );
}

#[test]
fn big_endian_is_rejected() {
    let path = scratch_dir("npy_big_endian").join("be.npy");
    let mut out = std::fs::File::create(&path).unwrap();
    let mut writer = npyz::WriteOptions::<f32>::new()
        .dtype(npyz::DType::Plain(">f4".parse().unwrap()))
        .shape(&[2])
        .writer(&mut out)
        .begin_nd()
        .unwrap();
    writer.extend([1.0, 2.0]).unwrap();
    writer.finish().unwrap();
    assert_eq!(
        read_err(&path),
        "`DIR/be.npy`: dtype '>f4' is big-endian; memc reads little-endian data (in NumPy: `a.astype(a.dtype.newbyteorder('<'))`)"
    );
}

#[test]
fn unsupported_dtypes_are_rejected() {
    let path = scratch_dir("npy_dtype").join("c.npy");
    std::fs::write(&path, numpy_file("<c8", "(1,)", &[0; 8])).unwrap();
    assert_eq!(
        read_err(&path),
        "`DIR/c.npy`: dtype '<c8' is not supported; memc reads bool, int8..int64, uint8..uint64, float16, float32 and float64, little-endian, in C order"
    );
    std::fs::write(&path, numpy_file("<U3", "(1,)", &[0; 12])).unwrap();
    assert_eq!(
        read_err(&path),
        "`DIR/c.npy`: dtype '<U3' is not supported; memc reads bool, int8..int64, uint8..uint64, float16, float32 and float64, little-endian, in C order"
    );
}

#[test]
fn damaged_files_are_rejected() {
    let dir = scratch_dir("npy_damaged");
    let path = dir.join("t.npy");
    write_npy(
        &path,
        TensorRef::from_slice(&[4], &[1i32, 2, 3, 4]).unwrap(),
    )
    .unwrap();
    let bytes = std::fs::read(&path).unwrap();

    std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
    assert_eq!(
        read_err(&path),
        "`DIR/t.npy`: the file is truncated: its header promises 4 elements of i32 (16 bytes of data) but 15 bytes follow the header"
    );
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0, 0]);
    std::fs::write(&path, &longer).unwrap();
    assert_eq!(
        read_err(&path),
        "`DIR/t.npy`: 2 unexpected bytes after the array's 16 bytes of data"
    );
    std::fs::write(&path, b"PK\x03\x04 this is an npz").unwrap();
    assert!(
        read_err(&path).starts_with("`DIR/t.npy`: not a valid .npy file: "),
        "{}",
        read_err(&path)
    );
    let missing = dir.join("missing.npy");
    assert!(
        read_err(&missing).starts_with("cannot read `DIR/missing.npy`: "),
        "{}",
        read_err(&missing)
    );
}

/// Found by fuzzing (`fuzz/regressions/read_npy/header_len_4gib.npy`): a version 2 preamble
/// whose header length says almost 4 GiB made npyz allocate that much before reading.
#[test]
fn header_length_beyond_the_file_is_rejected_before_allocating() {
    let dir = scratch_dir("npy_header_len");
    let path = dir.join("t.npy");
    let mut bytes = b"\x93NUMPY\x02\x00".to_vec();
    bytes.extend_from_slice(&0xff00_0074u32.to_le_bytes());
    bytes.extend_from_slice(b"{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }");
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(
        read_err(&path),
        "`DIR/t.npy`: not a valid .npy file: its header says it is 4278190196 bytes long but the file has 57 bytes after the preamble"
    );
    // A version 1 preamble has a 16-bit length.
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&0xfff0u16.to_le_bytes());
    bytes.extend_from_slice(b"{'descr': '<i4'");
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(
        read_err(&path),
        "`DIR/t.npy`: not a valid .npy file: its header says it is 65520 bytes long but the file has 15 bytes after the preamble"
    );
}

/// Found by fuzzing (`fuzz/regressions/read_npy/nested_braces_hang.npy`): npyz's parser of the
/// header's Python literal backtracks exponentially in its nesting depth, so 53 `{` hung.
#[test]
fn deeply_nested_headers_are_rejected_before_parsing() {
    let dir = scratch_dir("npy_header_depth");
    let path = dir.join("t.npy");
    let text = format!(
        "{{'descr': '|b1', 'fortran_order': False, {}\n",
        "{".repeat(60)
    );
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(text.len() as u16).to_le_bytes());
    bytes.extend_from_slice(text.as_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let started = std::time::Instant::now();
    assert_eq!(
        read_err(&path),
        "`DIR/t.npy`: not a valid .npy file: its header nests brackets 61 deep; memc reads headers nested at most 8 deep"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    // Brackets inside quoted strings do not count.
    let text = format!(
        "{{'descr': '<i4', 'fortran_order': False, 'shape': (1,), 'note': '{}', }}\n",
        "{".repeat(60)
    );
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(text.len() as u16).to_le_bytes());
    bytes.extend_from_slice(text.as_bytes());
    bytes.extend_from_slice(&7i32.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(read_npy(&path).unwrap().to_vec::<i32>().unwrap(), [7]);
    // Headers longer than NumPy's own limit are refused.
    let text = format!("{{'descr': '<i4', {}}}\n", " ".repeat(20_000));
    let mut bytes = b"\x93NUMPY\x02\x00".to_vec();
    bytes.extend_from_slice(&(text.len() as u32).to_le_bytes());
    bytes.extend_from_slice(text.as_bytes());
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(
        read_err(&path),
        "`DIR/t.npy`: not a valid .npy file: its header is 20019 bytes long; memc reads headers of at most 10000 bytes (NumPy's default limit)"
    );
}

/// Found by replaying the fuzz corpus in a debug build
/// (`fuzz/regressions/read_npy/shape_product_overflow.npy`): npyz multiplies the shape's dims
/// unchecked, which panicked on overflow.
#[test]
fn shapes_whose_size_overflows_are_rejected() {
    let dir = scratch_dir("npy_shape_overflow");
    let path = dir.join("t.npy");
    let text = "{'descr': '<f2', 'fortran_order': False, 'shape': (4028709020483540310, 10), }\n";
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(text.len() as u16).to_le_bytes());
    bytes.extend_from_slice(text.as_bytes());
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(
        read_err(&path),
        "`DIR/t.npy`: not a valid .npy file: the number of elements its shape gives overflows 64 bits"
    );
}

#[test]
fn bool_bytes_are_normalized() {
    let path = scratch_dir("npy_bool").join("b.npy");
    write_npy(
        &path,
        TensorRef::new(Scalar::Bool, &[3], &[0, 1, 1]).unwrap(),
    )
    .unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 1] = 7;
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(read_npy(&path).unwrap().data(), &[0, 1, 1]);
}

/// If the repository's Python environment has NumPy, check that NumPy reads what memc writes
/// and memc reads what NumPy writes, for every dtype.
#[test]
fn numpy_agrees() {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    let has_numpy = std::process::Command::new(&python)
        .args(["-c", "import numpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_numpy {
        eprintln!(
            "numpy_agrees: skipped: no NumPy at {} (scripts/test makes the venv)",
            python.display()
        );
        return;
    }
    let dir = scratch_dir("npy_numpy_agrees");
    let tensors = [
        Tensor::from_slice("b", vec![3], &[true, false, true]).unwrap(),
        Tensor::from_slice("i8", vec![2], &[-3i8, 4]).unwrap(),
        Tensor::from_slice("i16", vec![2], &[-3i16, 4]).unwrap(),
        Tensor::from_slice("i32", vec![2, 1], &[-3i32, 4]).unwrap(),
        Tensor::from_slice("i64", vec![], &[-3i64]).unwrap(),
        Tensor::from_slice("u8", vec![2], &[3u8, 250]).unwrap(),
        Tensor::from_slice("u16", vec![2], &[3u16, 65000]).unwrap(),
        Tensor::from_slice("u32", vec![2], &[3u32, 4_000_000_000]).unwrap(),
        Tensor::from_slice("u64", vec![2], &[3u64, u64::MAX]).unwrap(),
        Tensor::new("f16", Scalar::F16, vec![2], vec![0x00, 0x3c, 0x00, 0xc0]).unwrap(),
        Tensor::from_slice("f32", vec![1, 2], &[1.5f32, -2.0]).unwrap(),
        Tensor::from_slice("f64", vec![0, 2], &[] as &[f64]).unwrap(),
    ];
    for t in &tensors {
        write_npy(&dir.join(format!("{}.npy", t.name())), t.as_ref()).unwrap();
    }
    // NumPy loads each file and saves it again under another name.
    let script = "import numpy as np, sys, pathlib\n\
        for p in sorted(pathlib.Path(sys.argv[1]).glob('*.npy')):\n\
        \x20   a = np.load(p)\n\
        \x20   np.save(p.with_name(p.stem + '.np.npy'), a)\n\
        \x20   print(p.stem, a.dtype, list(a.shape), a.ravel().tolist())\n";
    let output = std::process::Command::new(&python)
        .args(["-c", script])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed = String::from_utf8(output.stdout).unwrap();
    assert_eq!(
        printed,
        "b bool [3] [True, False, True]\n\
         f16 float16 [2] [1.0, -2.0]\n\
         f32 float32 [1, 2] [1.5, -2.0]\n\
         f64 float64 [0, 2] []\n\
         i16 int16 [2] [-3, 4]\n\
         i32 int32 [2, 1] [-3, 4]\n\
         i64 int64 [] [-3]\n\
         i8 int8 [2] [-3, 4]\n\
         u16 uint16 [2] [3, 65000]\n\
         u32 uint32 [2] [3, 4000000000]\n\
         u64 uint64 [2] [3, 18446744073709551615]\n\
         u8 uint8 [2] [3, 250]\n"
    );
    for t in &tensors {
        let back = read_npy(&dir.join(format!("{}.np.npy", t.name()))).unwrap();
        assert_eq!(
            (back.elem(), back.shape(), back.data()),
            (t.elem(), t.shape(), t.data())
        );
    }
}

#[test]
fn types_numpy_lacks_are_written_as_raw_bytes() {
    // A bf16 and a float8 tensor: NumPy has no dtype for either, so the files hold raw bytes
    // (`|V2`, `|V1`, what NumPy saves ml_dtypes arrays as), which name no element type and so
    // are not read back.
    let dir = scratch_dir("npy_raw_bytes");
    for (elem, data) in [
        (Scalar::BF16, vec![0x80, 0x3f, 0x00, 0xc0]),
        (Scalar::F8E4M3FN, vec![0x38, 0xb8]),
    ] {
        let path = dir.join(format!("{}.npy", elem.name()));
        let tensor = TensorRef::new(elem, &[2], &data).unwrap();
        write_npy(&path, tensor).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let descr = format!("'descr': '|V{}'", elem.size());
        assert!(
            String::from_utf8_lossy(&bytes[..64]).contains(&descr),
            "{}",
            String::from_utf8_lossy(&bytes[..64])
        );
        assert_eq!(&bytes[bytes.len() - data.len()..], data.as_slice());
        assert_eq!(
            read_err(&path),
            format!(
                "`DIR/{}.npy`: dtype '|V{}' is raw bytes, which name no element type; memc reads bool, int8..int64, uint8..uint64, float16, float32 and float64, little-endian, in C order",
                elem.name(),
                elem.size()
            )
        );
    }
}
