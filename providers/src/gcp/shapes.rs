//! GPU machine types of Compute Engine, for when no Compute API token is
//! configured: name, vCPUs, memory (GiB), and the accelerator attached.

#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    pub name: String,
    pub vcpus: u32,
    pub memory_gib: f64,
    /// Compute Engine accelerator id, e.g. `nvidia-tesla-a100`.
    pub accelerator: String,
    pub accelerator_count: u32,
}

const SHAPES: &[(&str, u32, f64, &str, u32)] = &[
    ("a2-highgpu-1g", 12, 85.0, "nvidia-tesla-a100", 1),
    ("a2-highgpu-2g", 24, 170.0, "nvidia-tesla-a100", 2),
    ("a2-highgpu-4g", 48, 340.0, "nvidia-tesla-a100", 4),
    ("a2-highgpu-8g", 96, 680.0, "nvidia-tesla-a100", 8),
    ("a2-megagpu-16g", 96, 1360.0, "nvidia-tesla-a100", 16),
    ("a2-ultragpu-1g", 12, 170.0, "nvidia-a100-80gb", 1),
    ("a2-ultragpu-2g", 24, 340.0, "nvidia-a100-80gb", 2),
    ("a2-ultragpu-4g", 48, 680.0, "nvidia-a100-80gb", 4),
    ("a2-ultragpu-8g", 96, 1360.0, "nvidia-a100-80gb", 8),
    ("a3-highgpu-1g", 26, 234.0, "nvidia-h100-80gb", 1),
    ("a3-highgpu-2g", 52, 468.0, "nvidia-h100-80gb", 2),
    ("a3-highgpu-4g", 104, 936.0, "nvidia-h100-80gb", 4),
    ("a3-highgpu-8g", 208, 1872.0, "nvidia-h100-80gb", 8),
    ("a3-megagpu-8g", 208, 1872.0, "nvidia-h100-mega-80gb", 8),
    ("a3-ultragpu-8g", 224, 2952.0, "nvidia-h200-141gb", 8),
    ("a4-highgpu-8g", 224, 3968.0, "nvidia-b200", 8),
    ("g2-standard-4", 4, 16.0, "nvidia-l4", 1),
    ("g2-standard-8", 8, 32.0, "nvidia-l4", 1),
    ("g2-standard-12", 12, 48.0, "nvidia-l4", 1),
    ("g2-standard-16", 16, 64.0, "nvidia-l4", 1),
    ("g2-standard-24", 24, 96.0, "nvidia-l4", 2),
    ("g2-standard-32", 32, 128.0, "nvidia-l4", 1),
    ("g2-standard-48", 48, 192.0, "nvidia-l4", 4),
    ("g2-standard-96", 96, 384.0, "nvidia-l4", 8),
];

#[must_use]
pub fn builtin() -> Vec<Shape> {
    SHAPES
        .iter()
        .map(|(name, vcpus, memory_gib, accelerator, count)| Shape {
            name: (*name).to_owned(),
            vcpus: *vcpus,
            memory_gib: *memory_gib,
            accelerator: (*accelerator).to_owned(),
            accelerator_count: *count,
        })
        .collect()
}

/// The machine family whose core and RAM SKUs price a machine type (`a2-...` -> `A2`).
#[must_use]
pub fn family(machine_type: &str) -> String {
    machine_type
        .split('-')
        .next()
        .unwrap_or_default()
        .to_ascii_uppercase()
}
