//! The plan file: round trips, and every way a damaged or foreign file is rejected.

mod common;

use common::*;
use memc_ir::{ElemType, TensorType, WeightBytes, WeightStore};
use memc_runtime::plan::{PlanFile, PlanMeta, PlannerSummary, HEADER_LEN, WEIGHTS_ALIGN};
use memc_runtime::{write_plan, RuntimeError, PLAN_FORMAT_VERSION};
use std::path::Path;
use std::sync::Arc;

fn meta() -> (PlanMeta, WeightStore) {
    let (program, store) = add_matmul_program();
    let mut meta = PlanMeta::new("tiny.onnx", "cpu", program);
    meta.dims = vec![("batch".into(), 1)];
    meta.planner = Some(PlannerSummary {
        schedule: "greedy".into(),
        strategy: "best-fit".into(),
        arena_size: 128,
        bound_model_order: Some(112),
        bound_chosen_order: Some(80),
        scratch_peak: Some(16),
        load: 96,
        load_without_sharing: 144,
        load_model_order: 128,
        peak_step: 1,
        n_buffers: 3,
    });
    // The runtime stores the report as opaque JSON; any object round-trips.
    meta.memory_report = Some(serde_json::json!({"function": "main", "arena_size": 128}));
    (meta, store)
}

/// Writes the test plan into a fresh directory and returns its path and bytes.
fn written(test: &str) -> (std::path::PathBuf, Vec<u8>) {
    let path = scratch_dir(test).join("tiny.plan");
    let (meta, store) = meta();
    write_plan(&path, &meta, &store).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

/// The message of `err` with the scratch path replaced by `PLAN`.
fn message(err: RuntimeError, path: &Path) -> String {
    err.to_string().replace(&path.display().to_string(), "PLAN")
}

fn open_err(test: &str, bytes: &[u8]) -> String {
    let path = scratch_dir(test).join("tiny.plan");
    std::fs::write(&path, bytes).unwrap();
    message(PlanFile::open(&path).unwrap_err(), &path)
}

#[test]
fn round_trip_keeps_the_metadata_and_the_weights() {
    let (path, bytes) = written("round_trip");
    let (meta, _) = meta();
    let plan = PlanFile::open(&path).unwrap();
    assert_eq!(plan.meta(), &meta);
    assert_eq!(plan.meta().memc_version, env!("CARGO_PKG_VERSION"));
    let header = plan.header();
    assert_eq!(header.version, PLAN_FORMAT_VERSION);
    assert_eq!(u64::from(header.header_len), HEADER_LEN);
    assert_eq!(header.weights_offset % WEIGHTS_ALIGN, 0);
    assert_eq!(
        header.weights_offset + header.weights_len,
        bytes.len() as u64
    );
    assert_eq!(plan.file_len(), bytes.len() as u64);
    // Every weight at its slot, zeros between.
    let mut expected = vec![0u8; 96];
    expected[0..16].copy_from_slice(&f32_bytes(&BIAS));
    expected[64..96].copy_from_slice(&f32_bytes(&MATRIX));
    assert_eq!(plan.weights(), expected.as_slice());
    assert_eq!(
        plan.weights().as_ptr() as usize % 4096,
        0,
        "weights are page-aligned in memory"
    );
    plan.verify_weights().unwrap();
    // The metadata section is the JSON of the meta, padded with zeros.
    let metadata = &bytes[64..64 + header.metadata_len as usize];
    assert_eq!(serde_json::from_slice::<PlanMeta>(metadata).unwrap(), meta);
    assert!(
        bytes[64 + header.metadata_len as usize..header.weights_offset as usize]
            .iter()
            .all(|&b| b == 0)
    );
}

#[test]
fn the_documented_layout_is_what_is_written() {
    let (_, bytes) = written("documented_layout");
    let (meta, _) = meta();
    let metadata = serde_json::to_vec(&meta).unwrap();
    let weights = &bytes[bytes.len() - 96..];
    let assembled = assemble(
        PLAN_FORMAT_VERSION,
        &metadata,
        weights,
        crc32fast::hash(weights),
    );
    assert_eq!(assembled, bytes);
}

#[test]
fn write_reports_its_figures_and_leaves_no_temporary_file() {
    let dir = scratch_dir("write_stats");
    let path = dir.join("tiny.plan");
    let (meta, store) = meta();
    let stats = write_plan(&path, &meta, &store).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(stats.file_bytes, bytes.len() as u64);
    assert_eq!(stats.weights_bytes, 96);
    assert_eq!(stats.n_weights, 2);
    assert_eq!(
        stats.metadata_bytes,
        serde_json::to_vec(&meta).unwrap().len() as u64
    );
    assert_eq!(
        stats.weights_crc,
        crc32fast::hash(&bytes[bytes.len() - 96..])
    );
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["tiny.plan"]);
}

#[test]
fn a_program_without_weights_round_trips() {
    let (mut program, _) = add_matmul_program();
    program.steps.clear();
    program.weights.clear();
    program.outputs.truncate(1);
    program.weights_size = 0;
    let meta = PlanMeta::new("noweights.onnx", "cpu", program);
    let path = scratch_dir("no_weights").join("w.plan");
    let stats = write_plan(&path, &meta, &WeightStore::new()).unwrap();
    assert_eq!(stats.file_bytes, 4096);
    let plan = PlanFile::open(&path).unwrap();
    assert_eq!(plan.meta(), &meta);
    assert!(plan.weights().is_empty());
    plan.verify_weights().unwrap();
}

#[test]
fn a_corrupted_metadata_byte_is_a_checksum_error() {
    let (_, mut bytes) = written("corrupt_metadata");
    bytes[100] ^= 0x20;
    let err = open_err("corrupt_metadata", &bytes);
    assert!(
        err.starts_with(
            "`PLAN`: the plan file is corrupted: metadata checksum mismatch (recorded 0x"
        ),
        "{err}"
    );
}

#[test]
fn a_corrupted_header_byte_is_a_checksum_error() {
    let (_, mut bytes) = written("corrupt_header");
    bytes[40] ^= 1; // the weights length
    let err = open_err("corrupt_header", &bytes);
    assert!(
        err.starts_with("`PLAN`: the plan file is corrupted: header checksum mismatch"),
        "{err}"
    );
}

#[test]
fn a_corrupted_weight_byte_is_found_by_verify_weights() {
    let (_, mut bytes) = written("corrupt_weights");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    let path = scratch_dir("corrupt_weights").join("tiny.plan");
    std::fs::write(&path, &bytes).unwrap();
    // Opening does not read the weights; verifying does.
    let plan = PlanFile::open(&path).unwrap();
    let err = message(plan.verify_weights().unwrap_err(), &path);
    assert!(
        err.starts_with(
            "`PLAN`: the plan file is corrupted: weights checksum mismatch (recorded 0x"
        ),
        "{err}"
    );
}

#[test]
fn truncated_files_are_errors() {
    let (_, bytes) = written("truncated");
    assert_eq!(
        open_err("truncated", &[]),
        "`PLAN`: the plan file is truncated: it has 0 bytes but its header ends at byte 64"
    );
    assert_eq!(
        open_err("truncated", &bytes[..5]),
        "`PLAN`: the plan file is truncated: it has 5 bytes but its header ends at byte 64"
    );
    assert_eq!(
        open_err("truncated", &bytes[..40]),
        "`PLAN`: the plan file is truncated: it has 40 bytes but its header ends at byte 64"
    );
    assert_eq!(
        open_err("truncated", &bytes[..100]),
        format!(
            "`PLAN`: the plan file is truncated: it has 100 bytes but its metadata ends at byte {}",
            64 + u64::from_le_bytes(bytes[24..32].try_into().unwrap())
        )
    );
    let n = bytes.len();
    assert_eq!(
        open_err("truncated", &bytes[..n - 1]),
        format!(
            "`PLAN`: the plan file is truncated: it has {} bytes but its weights section ends at byte {n}",
            n - 1
        )
    );
}

#[test]
fn trailing_bytes_are_an_error() {
    let (_, mut bytes) = written("trailing");
    bytes.push(0);
    assert_eq!(
        open_err("trailing", &bytes),
        "`PLAN`: the plan file is corrupted: 1 unexpected bytes after the weights section"
    );
}

#[test]
fn another_format_version_is_an_error() {
    let (_, mut bytes) = written("version");
    bytes[8..12].copy_from_slice(&9u32.to_le_bytes());
    assert_eq!(
        open_err("version", &bytes),
        "`PLAN`: plan format version 9, this memc reads versions 4 to 8; recompile the model"
    );
    // The version is read before the header's length and checksum: a future format may
    // change both.
    assert_eq!(
        open_err("version", &bytes[..12]),
        "`PLAN`: plan format version 9, this memc reads versions 4 to 8; recompile the model"
    );
}

#[test]
fn a_plan_of_format_version_1_is_an_error() {
    // Version 1 plans (before packed slots recorded their layout) are not read: recompile.
    let (_, mut bytes) = written("version_1");
    bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
    assert_eq!(
        open_err("version_1", &bytes),
        "`PLAN`: plan format version 1, this memc reads versions 4 to 8; recompile the model"
    );
}

#[test]
fn a_plan_of_format_version_4_reads_without_a_memory_report() {
    // Version 4 differs from 5 only in lacking the metadata's `memory_report`.
    let (meta, _) = meta();
    let mut value = serde_json::to_value(&meta).unwrap();
    value.as_object_mut().unwrap().remove("memory_report");
    let (_, bytes) = written("version_4");
    let weights = &bytes[bytes.len() - 96..];
    let old = assemble(
        4,
        &serde_json::to_vec(&value).unwrap(),
        weights,
        crc32fast::hash(weights),
    );
    let path = scratch_dir("version_4").join("old.plan");
    std::fs::write(&path, old).unwrap();
    let plan = PlanFile::open(&path).unwrap();
    assert_eq!(plan.header().version, 4);
    assert_eq!(plan.meta().memory_report, None);
    assert_eq!(plan.meta().program, meta.program);
    plan.verify_weights().unwrap();
    // Version 3 is refused.
    let mut older = std::fs::read(&path).unwrap();
    older[8..12].copy_from_slice(&3u32.to_le_bytes());
    fix_header_crc(&mut older);
    assert_eq!(
        open_err("version_4", &older),
        "`PLAN`: plan format version 3, this memc reads versions 4 to 8; recompile the model"
    );
}

#[test]
fn a_file_that_is_not_a_plan_is_an_error() {
    assert_eq!(
        open_err("magic", b"\x08\x07\x12\x04onnx model bytes"),
        "`PLAN` is not a memc plan file (it does not start with `MEMCPLAN`)"
    );
    let (_, mut bytes) = written("magic");
    bytes[0] = b'm';
    assert_eq!(
        open_err("magic", &bytes),
        "`PLAN` is not a memc plan file (it does not start with `MEMCPLAN`)"
    );
}

#[test]
fn a_missing_file_is_an_error() {
    let path = scratch_dir("missing").join("nothing.plan");
    let err = message(PlanFile::open(&path).unwrap_err(), &path);
    assert!(err.starts_with("cannot read `PLAN`: "), "{err}");
}

#[test]
fn inconsistent_sections_are_errors() {
    let (_, bytes) = written("sections");
    let mut misaligned = bytes.clone();
    misaligned[32..40].copy_from_slice(&4000u64.to_le_bytes());
    fix_header_crc(&mut misaligned);
    assert_eq!(
        open_err("sections", &misaligned),
        "`PLAN`: the plan file is corrupted: the weights section starts at offset 4000, which is not a multiple of 4096"
    );
    let mut overlapping = bytes.clone();
    overlapping[24..32].copy_from_slice(&5000u64.to_le_bytes());
    fix_header_crc(&mut overlapping);
    assert_eq!(
        open_err("sections", &overlapping),
        "`PLAN`: the plan file is corrupted: the weights section (offset 4096) overlaps the metadata (bytes 64..5064)"
    );
    let mut huge = bytes.clone();
    huge[40..48].copy_from_slice(&u64::MAX.to_le_bytes());
    fix_header_crc(&mut huge);
    assert_eq!(
        open_err("sections", &huge),
        "`PLAN`: the plan file is corrupted: the weights length overflows"
    );
    let mut long_header = bytes.clone();
    long_header[12..16].copy_from_slice(&128u32.to_le_bytes());
    fix_header_crc(&mut long_header);
    assert_eq!(
        open_err("sections", &long_header),
        "`PLAN`: the plan file is corrupted: the header says it is 128 bytes long; version 8 headers are 64"
    );
}

#[test]
fn metadata_that_is_not_a_plan_meta_is_an_error() {
    let err = open_err(
        "bad_json",
        &assemble(PLAN_FORMAT_VERSION, b"{\"memc_version\": 1}", &[], 0),
    );
    assert!(
        err.starts_with("`PLAN`: the plan's metadata is not valid: invalid type: integer `1`"),
        "{err}"
    );
    let err = open_err(
        "bad_json",
        &assemble(PLAN_FORMAT_VERSION, b"\xff\xfe", &[], 0),
    );
    assert!(
        err.starts_with("`PLAN`: the plan's metadata is not valid: "),
        "{err}"
    );
}

#[test]
fn a_kernel_reaching_outside_the_arena_is_rejected_at_load() {
    let (meta, _) = meta();
    let mut json = serde_json::to_value(&meta).unwrap();
    // The Add kernel's output view: 4 floats at byte 64 of a 128-byte arena; move it to 120.
    let out_view = &mut json["program"]["steps"][0]["kernels"][0]["body"]["Loop"]["views"][2];
    assert_eq!(out_view["byte_offset"], 64);
    out_view["byte_offset"] = 120.into();
    let metadata = serde_json::to_vec(&json).unwrap();
    let weights = vec![0u8; 96];
    let bytes = assemble(
        PLAN_FORMAT_VERSION,
        &metadata,
        &weights,
        crc32fast::hash(&weights),
    );
    assert_eq!(
        open_err("out_of_bounds", &bytes),
        "`PLAN`: the plan's program is invalid: kernel `Add add #0`: view 2 reaches bytes 120..136 outside its region of 128 bytes"
    );
}

#[test]
fn a_weights_section_of_the_wrong_length_is_rejected_at_load() {
    let (meta, _) = meta();
    let metadata = serde_json::to_vec(&meta).unwrap();
    let weights = vec![0u8; 128];
    let bytes = assemble(
        PLAN_FORMAT_VERSION,
        &metadata,
        &weights,
        crc32fast::hash(&weights),
    );
    assert_eq!(
        open_err("weights_length", &bytes),
        "`PLAN`: the plan file is corrupted: the weights section is 128 bytes but the program reads 96"
    );
}

#[test]
fn duplicate_input_names_are_rejected_at_load() {
    let (mut meta, _) = meta();
    let x = meta.program.inputs[0].clone();
    meta.program.inputs.push(x);
    let metadata = serde_json::to_vec(&meta).unwrap();
    let weights = vec![0u8; 96];
    let bytes = assemble(
        PLAN_FORMAT_VERSION,
        &metadata,
        &weights,
        crc32fast::hash(&weights),
    );
    assert_eq!(
        open_err("duplicate_names", &bytes),
        "`PLAN`: the plan file is corrupted: tensor `x` is listed twice"
    );
}

fn write_err(test: &str, meta: &PlanMeta, store: &WeightStore) -> String {
    let dir = scratch_dir(test);
    let err = write_plan(&dir.join("tiny.plan"), meta, store).unwrap_err();
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(
        names.is_empty(),
        "a failed write leaves nothing behind: {names:?}"
    );
    err.to_string()
}

#[test]
fn writing_checks_every_weight_against_its_slot() {
    let (meta, _) = meta();
    let ty = |n: u64| TensorType::with_shape(ElemType::F32, &[n]);
    let owned = |n: usize| WeightBytes::Owned(Arc::from(vec![0u8; n]));

    let mut store = WeightStore::new();
    store.insert("bias", ty(4), owned(16)).unwrap();
    assert_eq!(
        write_err("write_missing", &meta, &store),
        "weight `matrix` has a slot in the plan but is not in the model's weight store"
    );

    store.insert("matrix", ty(8), WeightBytes::Absent).unwrap();
    assert_eq!(
        write_err("write_absent", &meta, &store),
        "weight `matrix` has no bytes (IR parsed from text names weights without their data)"
    );

    let mut store = WeightStore::new();
    store.insert("bias", ty(4), owned(16)).unwrap();
    store.insert("matrix", ty(4), owned(16)).unwrap();
    assert_eq!(
        write_err("write_size", &meta, &store),
        "weight `matrix` has 16 bytes but its slot in the plan holds 32"
    );

    let (mut meta, store) = self::meta();
    meta.program.weights[0].byte_offset = 0;
    meta.program.outputs.truncate(1);
    assert_eq!(
        write_err("write_overlap", &meta, &store),
        "weight slots `matrix` and `bias` overlap in the weights section"
    );
}

#[test]
fn writing_an_invalid_program_is_refused() {
    let (mut meta, store) = meta();
    meta.program.outputs[0].byte_offset = 1000;
    assert_eq!(
        write_err("write_invalid", &meta, &store),
        "memc bug: the program to write is invalid: kernel `program`: tensor `y` lies outside its region"
    );
}

#[test]
fn a_failed_write_keeps_the_old_plan() {
    let dir = scratch_dir("failed_write_keeps");
    let path = dir.join("tiny.plan");
    let (meta, store) = meta();
    write_plan(&path, &meta, &store).unwrap();
    let before = std::fs::read(&path).unwrap();
    let err = write_plan(&path, &meta, &WeightStore::new()).unwrap_err();
    assert!(matches!(err, RuntimeError::WeightMissing { .. }), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["tiny.plan"]);
}

#[test]
fn writing_into_a_missing_directory_is_an_error() {
    let dir = scratch_dir("write_no_dir");
    let path = dir.join("no/such/dir/tiny.plan");
    let (meta, store) = meta();
    let err = write_plan(&path, &meta, &store).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("cannot write `{}`: ", path.display())),
        "{err}"
    );
}

#[test]
fn progress_counts_the_weights_section_and_can_cancel_the_write() {
    use memc_codegen::program::WeightSlot;
    use memc_runtime::{write_plan_with_progress, WriteProgress};
    let (mut meta, mut store) = meta();
    // A 20 MiB weight after the two small ones, copied in 4 MiB chunks: a report per chunk.
    let big = 20u64 << 20;
    meta.program.weights.push(WeightSlot {
        name: "big".into(),
        byte_offset: 4096,
        byte_size: big,
        pack: None,
        unpacked: None,
        operand: None,
    });
    meta.program.weights_size = 4096 + big;
    let total = meta.program.weights_size;
    store
        .insert(
            "big",
            TensorType::with_shape(ElemType::U8, &[big]),
            WeightBytes::Owned(Arc::from(vec![7u8; big as usize])),
        )
        .unwrap();
    let dir = scratch_dir("write_progress");
    let path = dir.join("tiny.plan");
    let mut seen = Vec::new();
    write_plan_with_progress(&path, &meta, &store, &mut |p| {
        seen.push(p);
        true
    })
    .unwrap();
    assert_eq!(seen.first(), Some(&WriteProgress { done: 0, total }));
    assert_eq!(seen.last(), Some(&WriteProgress { done: total, total }));
    assert!(seen.windows(2).all(|w| w[0].done < w[1].done), "{seen:?}");
    assert!((6..=40).contains(&seen.len()), "{} reports", seen.len());
    assert_eq!(PlanFile::open(&path).unwrap().weights().len() as u64, total);

    // Cancelled halfway: the plan written before stays, and no temporary file is left.
    let before = std::fs::read(&path).unwrap();
    let mut last = 0;
    let err = write_plan_with_progress(&path, &meta, &store, &mut |p| {
        last = p.done;
        p.done < total / 2
    })
    .unwrap_err();
    assert!(last >= total / 2 && last < total, "cancelled at {last}");
    assert!(matches!(err, RuntimeError::WriteCancelled { .. }), "{err}");
    assert_eq!(
        message(err, &path),
        "writing `PLAN` was cancelled; the file is as it was before"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["tiny.plan"]);
}

/// Plans written before the activation bounds read them as absent, and new ones round-trip.
#[test]
fn planner_summary_without_bounds_reads() {
    let old = serde_json::json!({
        "schedule": "model order", "strategy": "best-fit", "arena_size": 128, "load": 96,
        "load_without_sharing": 144, "load_model_order": 128, "peak_step": 1, "n_buffers": 3
    });
    let summary: PlannerSummary = serde_json::from_value(old).unwrap();
    assert_eq!(summary.bound_model_order, None);
    assert_eq!(summary.bound_chosen_order, None);
    assert_eq!(summary.scratch_peak, None);
    let (meta, _) = meta();
    let planner = meta.planner.unwrap();
    let again: PlannerSummary =
        serde_json::from_value(serde_json::to_value(&planner).unwrap()).unwrap();
    assert_eq!(again, planner);
    assert_eq!(again.bound_model_order, Some(112));
}
