//! The GPU of each AWS GPU instance family. The price list gives a GPU count
//! but no model (and its `gpuMemory` text is unreliable), so the model comes
//! from the family, as catalog names resolve it.

const FAMILIES: &[(&str, &str)] = &[
    ("p2", "K80"),
    ("p3", "V100"),
    ("p3dn", "V100-32GB"),
    ("p4d", "A100-40GB"),
    ("p4de", "A100-80GB"),
    ("p5", "H100-80GB"),
    ("p5e", "H200-141GB"),
    ("p5en", "H200-141GB"),
    ("p6-b200", "B200"),
    ("g3", "M60"),
    ("g3s", "M60"),
    ("g4dn", "T4"),
    ("g4ad", "V520"),
    ("g5", "A10G"),
    ("g5g", "T4G"),
    ("g6", "L4"),
    ("gr6", "L4"),
    ("g6e", "L40S"),
    ("dl1", "Gaudi"),
];

/// The family of an instance type (`p4de.24xlarge` -> `p4de`).
#[must_use]
pub fn family(instance_type: &str) -> &str {
    instance_type.split('.').next().unwrap_or_default()
}

/// The catalog GPU name of an instance family (`p4de` -> `A100-80GB`).
#[must_use]
pub fn model(family: &str) -> Option<&'static str> {
    FAMILIES.iter().find(|(f, _)| *f == family).map(|(_, m)| *m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_maps_to_a_catalog_gpu() {
        for (family, model) in FAMILIES {
            assert!(crate::gpu::canonical(model).is_some(), "{family}: {model}");
        }
    }
}
