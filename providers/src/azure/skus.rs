//! GPU facts for Azure VM sizes. The Retail Prices API has no GPU information, so
//! the N-series sizes are listed here (GPU model as the catalog names it, GPUs per
//! VM, vCPUs, memory). Sizes that carry a slice of one GPU say how much of it.

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SkuSpec {
    pub gpu_model: &'static str,
    /// GPUs per VM, or the share of one (NVadsA10 v5 below NV36: 1/6 to 1/2).
    pub gpus: f64,
    pub vcpus: u32,
    pub memory_gib: f64,
}

const fn whole(gpu_model: &'static str, n: u32, vcpus: u32, memory_gib: f64) -> SkuSpec {
    SkuSpec {
        gpu_model,
        gpus: n as f64,
        vcpus,
        memory_gib,
    }
}

const fn slice(gpu_model: &'static str, share: f64, vcpus: u32, memory_gib: f64) -> SkuSpec {
    SkuSpec {
        gpu_model,
        gpus: share,
        vcpus,
        memory_gib,
    }
}

const SKUS: &[(&str, SkuSpec)] = &[
    // NCasT4_v3: NVIDIA T4.
    ("Standard_NC4as_T4_v3", whole("T4", 1, 4, 28.0)),
    ("Standard_NC8as_T4_v3", whole("T4", 1, 8, 56.0)),
    ("Standard_NC16as_T4_v3", whole("T4", 1, 16, 110.0)),
    ("Standard_NC64as_T4_v3", whole("T4", 4, 64, 440.0)),
    // NCv3: V100 16 GB.
    ("Standard_NC6s_v3", whole("V100", 1, 6, 112.0)),
    ("Standard_NC12s_v3", whole("V100", 2, 12, 224.0)),
    ("Standard_NC24s_v3", whole("V100", 4, 24, 448.0)),
    ("Standard_NC24rs_v3", whole("V100", 4, 24, 448.0)),
    // NDv2: V100 32 GB.
    ("Standard_ND40rs_v2", whole("V100-32GB", 8, 40, 672.0)),
    // NC A100 v4: A100 80 GB PCIe.
    ("Standard_NC24ads_A100_v4", whole("A100-80GB", 1, 24, 220.0)),
    ("Standard_NC48ads_A100_v4", whole("A100-80GB", 2, 48, 440.0)),
    ("Standard_NC96ads_A100_v4", whole("A100-80GB", 4, 96, 880.0)),
    // ND A100 v4 (40 GB) and NDm A100 v4 (80 GB).
    ("Standard_ND96asr_v4", whole("A100-40GB", 8, 96, 900.0)),
    (
        "Standard_ND96amsr_A100_v4",
        whole("A100-80GB", 8, 96, 1900.0),
    ),
    // NC H100 v5 (H100 NVL 94 GB) and the confidential NCC variant.
    ("Standard_NC40ads_H100_v5", whole("H100-94GB", 1, 40, 320.0)),
    (
        "Standard_NC80adis_H100_v5",
        whole("H100-94GB", 2, 80, 640.0),
    ),
    (
        "Standard_NCC40ads_H100_v5",
        whole("H100-94GB", 1, 40, 320.0),
    ),
    // ND H100 v5, ND H200 v5, ND MI300X v5, ND GB200 v6.
    (
        "Standard_ND96isr_H100_v5",
        whole("H100-80GB", 8, 96, 1900.0),
    ),
    (
        "Standard_ND96isr_H200_v5",
        whole("H200-141GB", 8, 96, 1850.0),
    ),
    ("Standard_ND96isr_MI300X_v5", whole("MI300X", 8, 96, 1850.0)),
    (
        "Standard_ND128isr_NDR_GB200_v6",
        whole("GB200", 4, 128, 900.0),
    ),
    // NVadsA10 v5: A10; below NV36 a VM gets a slice of one GPU (1/6, 1/3, 1/2).
    ("Standard_NV6ads_A10_v5", slice("A10", 1.0 / 6.0, 6, 55.0)),
    (
        "Standard_NV12ads_A10_v5",
        slice("A10", 1.0 / 3.0, 12, 110.0),
    ),
    ("Standard_NV18ads_A10_v5", slice("A10", 0.5, 18, 220.0)),
    ("Standard_NV36ads_A10_v5", whole("A10", 1, 36, 440.0)),
    ("Standard_NV36adms_A10_v5", whole("A10", 1, 36, 880.0)),
    ("Standard_NV72ads_A10_v5", whole("A10", 2, 72, 880.0)),
    // NVv3: Tesla M60.
    ("Standard_NV12s_v3", whole("M60", 1, 12, 112.0)),
    ("Standard_NV24s_v3", whole("M60", 2, 24, 224.0)),
    ("Standard_NV48s_v3", whole("M60", 4, 48, 448.0)),
    // NDs: Tesla P40.
    ("Standard_ND6s", whole("P40", 1, 6, 112.0)),
    ("Standard_ND12s", whole("P40", 2, 12, 224.0)),
    ("Standard_ND24s", whole("P40", 4, 24, 448.0)),
    ("Standard_ND24rs", whole("P40", 4, 24, 448.0)),
];

/// The GPU facts of an ARM size name, if it is in the table.
#[must_use]
pub fn lookup(arm_sku_name: &str) -> Option<SkuSpec> {
    SKUS.iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(arm_sku_name))
        .map(|(_, spec)| *spec)
}

/// Every size, slices included: (size, GPU model, GPUs per VM).
pub fn sizes() -> impl Iterator<Item = (&'static str, &'static str, f64)> {
    SKUS.iter()
        .map(|(name, spec)| (*name, spec.gpu_model, spec.gpus))
}

/// Whether a size belongs to a GPU family (NC, ND, NG, NV), known or not.
#[must_use]
pub fn is_gpu_family(arm_sku_name: &str) -> bool {
    let Some(size) = arm_sku_name.strip_prefix("Standard_") else {
        return false;
    };
    ["NC", "ND", "NG", "NV"].iter().any(|f| size.starts_with(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu;

    #[test]
    fn every_table_gpu_is_a_catalog_name() {
        for (sku, spec) in SKUS {
            assert!(
                gpu::canonical(spec.gpu_model).is_some(),
                "{sku}: {} is not a catalog GPU name",
                spec.gpu_model
            );
            assert!(is_gpu_family(sku), "{sku}");
        }
    }

    #[test]
    fn families_are_recognized_by_prefix() {
        assert!(is_gpu_family("Standard_NC999_v9"));
        assert!(!is_gpu_family("Standard_D4s_v5"));
        assert!(!is_gpu_family("Standard_NP10s"));
        assert_eq!(lookup("standard_nc24ads_a100_v4").unwrap().gpus, 1.0);
        assert_eq!(lookup("Standard_NV6ads_A10_v5").unwrap().gpus, 1.0 / 6.0);
    }
}
