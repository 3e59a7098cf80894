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
    ("p6-b300", "B300"),
    // DescribeInstanceTypes names this GPU just `NVIDIA`.
    ("p6e-gb200", "GB200"),
    ("g3", "M60"),
    ("g3s", "M60"),
    ("g4dn", "T4"),
    ("g4ad", "V520"),
    ("g5", "A10G"),
    ("g5g", "T4G"),
    ("g6", "L4"),
    ("gr6", "L4"),
    ("g6e", "L40S"),
    // Slices of an L4: see FRACTIONS.
    ("g6f", "L4"),
    ("gr6f", "L4"),
    // DescribeInstanceTypes says `RTX PRO 6000 Blackwell Server Edition`.
    ("g7e", "RTX-PRO-6000"),
    ("dl1", "Gaudi"),
];

/// GPUs per instance of each GPU size, for readers that meet a size before
/// any price list has said (billing exports read without a catalog sync).
const SIZES: &[(&str, u32)] = &[
    ("p2.xlarge", 1),
    ("p2.8xlarge", 8),
    ("p2.16xlarge", 16),
    ("p3.2xlarge", 1),
    ("p3.8xlarge", 4),
    ("p3.16xlarge", 8),
    ("p3dn.24xlarge", 8),
    ("p4d.24xlarge", 8),
    ("p4de.24xlarge", 8),
    ("p5.4xlarge", 1),
    ("p5.48xlarge", 8),
    ("p5e.48xlarge", 8),
    ("p5en.48xlarge", 8),
    ("p6-b200.48xlarge", 8),
    ("p6-b300.48xlarge", 8),
    ("p6e-gb200.36xlarge", 4),
    ("g3s.xlarge", 1),
    ("g3.4xlarge", 1),
    ("g3.8xlarge", 2),
    ("g3.16xlarge", 4),
    ("g4dn.xlarge", 1),
    ("g4dn.2xlarge", 1),
    ("g4dn.4xlarge", 1),
    ("g4dn.8xlarge", 1),
    ("g4dn.16xlarge", 1),
    ("g4dn.12xlarge", 4),
    ("g4dn.metal", 8),
    ("g4ad.xlarge", 1),
    ("g4ad.2xlarge", 1),
    ("g4ad.4xlarge", 1),
    ("g4ad.8xlarge", 2),
    ("g4ad.16xlarge", 4),
    ("g5.xlarge", 1),
    ("g5.2xlarge", 1),
    ("g5.4xlarge", 1),
    ("g5.8xlarge", 1),
    ("g5.16xlarge", 1),
    ("g5.12xlarge", 4),
    ("g5.24xlarge", 4),
    ("g5.48xlarge", 8),
    ("g5g.xlarge", 1),
    ("g5g.2xlarge", 1),
    ("g5g.4xlarge", 1),
    ("g5g.8xlarge", 1),
    ("g5g.16xlarge", 2),
    ("g5g.metal", 2),
    ("g6.xlarge", 1),
    ("g6.2xlarge", 1),
    ("g6.4xlarge", 1),
    ("g6.8xlarge", 1),
    ("g6.16xlarge", 1),
    ("g6.12xlarge", 4),
    ("g6.24xlarge", 4),
    ("g6.48xlarge", 8),
    ("g6e.xlarge", 1),
    ("g6e.2xlarge", 1),
    ("g6e.4xlarge", 1),
    ("g6e.8xlarge", 1),
    ("g6e.16xlarge", 1),
    ("g6e.12xlarge", 4),
    ("g6e.24xlarge", 4),
    ("g6e.48xlarge", 8),
    ("g7e.2xlarge", 1),
    ("g7e.4xlarge", 1),
    ("g7e.8xlarge", 1),
    ("g7e.12xlarge", 2),
    ("g7e.24xlarge", 4),
    ("g7e.48xlarge", 8),
    ("dl1.24xlarge", 8),
];

/// Sizes that rent a slice of one GPU, and how much of it. The price list's
/// `gpu` attribute does not say (it reads 1), so the public files take the
/// share from here; with credentials DescribeInstanceTypes'
/// `gpuPartitionSize` says it.
const FRACTIONS: &[(&str, f64)] = &[
    ("g6f.large", 0.125),
    ("g6f.xlarge", 0.125),
    ("g6f.2xlarge", 0.25),
    ("g6f.4xlarge", 0.5),
    ("gr6f.4xlarge", 0.5),
];

/// The share of one GPU a fractional size rents (`g6f.2xlarge` -> 0.25).
#[must_use]
pub fn fraction(instance_type: &str) -> Option<f64> {
    FRACTIONS
        .iter()
        .find(|(t, _)| *t == instance_type)
        .map(|(_, f)| *f)
}

/// Every GPU size this table knows, slices included: (instance type, GPU
/// model, GPUs).
pub fn sizes() -> impl Iterator<Item = (&'static str, &'static str, f64)> {
    SIZES
        .iter()
        .map(|(t, n)| (*t, f64::from(*n)))
        .chain(FRACTIONS.iter().copied())
        .filter_map(|(t, n)| model(family(t)).map(|m| (t, m, n)))
}

/// The family of an instance type (`p4de.24xlarge` -> `p4de`).
#[must_use]
pub fn family(instance_type: &str) -> &str {
    instance_type.split('.').next().unwrap_or_default()
}

/// The form of the GPUs of a family: AWS's A100, H100, H200 and V100
/// instances are all HGX boards of SXM modules.
#[must_use]
pub fn form_factor(family: &str) -> Option<crate::FormFactor> {
    matches!(
        family,
        "p3" | "p3dn" | "p4d" | "p4de" | "p5" | "p5e" | "p5en"
    )
    .then_some(crate::FormFactor::Sxm)
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
    fn every_size_has_a_known_family() {
        assert_eq!(sizes().count(), SIZES.len() + FRACTIONS.len());
    }

    #[test]
    fn fractional_sizes_are_slices_of_a_known_family() {
        for (t, share) in FRACTIONS {
            assert_eq!(model(family(t)), Some("L4"), "{t}");
            assert!(*share > 0.0 && *share < 1.0, "{t}");
        }
        assert_eq!(fraction("g6f.2xlarge"), Some(0.25));
        assert_eq!(fraction("g6.2xlarge"), None);
    }

    #[test]
    fn every_family_maps_to_a_catalog_gpu() {
        for (family, model) in FAMILIES {
            assert!(crate::gpu::canonical(model).is_some(), "{family}: {model}");
        }
    }
}
