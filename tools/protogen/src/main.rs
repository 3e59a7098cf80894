//! Writes the Rust code for the vendored Nebius protos into
//! `providers/src/nebius/proto/` (or the directory given as the only
//! argument, which CI uses to compare with the committed code).

use std::path::PathBuf;

const PROTOS: [&str; 3] = [
    "nebius/compute/v1/platform_service.proto",
    "nebius/compute/v1/instance_service.proto",
    "nebius/billing/v1/calculator_service.proto",
];

const UNUSED: [&str; 2] = ["buf.validate.rs", "nebius.rs"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::env::args_os()
        .nth(1)
        .map_or_else(|| root.join("providers/src/nebius/proto"), PathBuf::from);
    std::fs::create_dir_all(&out)?;
    let protos: Vec<PathBuf> = PROTOS
        .iter()
        .map(|p| root.join("providers/proto").join(p))
        .collect();
    tonic_prost_build::configure()
        .out_dir(&out)
        // Only the adapter's own calls, and the stand-in's servers of them.
        .build_client(true)
        .build_server(true)
        .build_transport(false)
        .emit_rerun_if_changed(false)
        .compile_protos(&protos, &[root.join("providers/proto"), "/usr/include".into()])?;
    // The imports' option types (validation rules, Nebius's field
    // annotations) are never read: their code is not kept.
    for unused in UNUSED {
        std::fs::remove_file(out.join(unused))?;
    }
    Ok(())
}
