//! Which billed instance types and SKUs are GPUs, and how many: the catalog's
//! instance types and GPU SKUs first, then the providers' own GPU tables.
//! Nothing is guessed: a row that says it carries GPUs but names a type no
//! table places is reported as unmapped.

use std::collections::HashMap;

use super::BillProvider;

/// A GPU instance type or SKU as the catalog spells it.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuType {
    pub instance_type: String,
    pub gpu_model: String,
    /// GPUs per instance (or the share of one a slice rents); `None` for a
    /// SKU billed per GPU-hour.
    pub gpu_count: Option<f64>,
}

/// What a row's instance type or SKU is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Placement<'g> {
    Gpu(&'g GpuType),
    /// It carries GPUs, but no table says which or how many.
    Unmapped,
    NotGpu,
}

/// The GPU types of one provider.
#[derive(Debug, Clone, Default)]
pub struct GpuTypes {
    provider: Option<BillProvider>,
    /// By folded name (see [`fold`]).
    types: HashMap<String, GpuType>,
    /// By SKU id or part number.
    skus: HashMap<String, GpuType>,
}

/// The GPU types of every cloud, for files whose rows name their own
/// provider; another provider's rows are placed by none.
#[derive(Debug, Clone, Default)]
pub struct GpuTables {
    clouds: Vec<GpuTypes>,
    none: GpuTypes,
}

impl GpuTables {
    #[must_use]
    pub fn new(clouds: Vec<GpuTypes>) -> Self {
        Self {
            clouds,
            none: GpuTypes::default(),
        }
    }

    /// The types of `provider`'s rows; none for another provider.
    #[must_use]
    pub fn of(&self, provider: Option<BillProvider>) -> &GpuTypes {
        self.clouds
            .iter()
            .find(|t| t.provider.is_some() && t.provider == provider)
            .unwrap_or(&self.none)
    }
}

/// A catalog row: (instance type, GPU model, GPUs per instance).
pub type CatalogType = (String, String, f64);
/// A catalog GPU price: (SKU or part number, instance type, GPU model).
pub type CatalogSku = (String, String, String);

/// Azure sizes match with or without `Standard_`, in any case.
fn fold(provider: BillProvider, name: &str) -> String {
    let lower = name.trim().to_ascii_lowercase();
    match provider {
        BillProvider::Azure => lower
            .strip_prefix("standard_")
            .map_or(lower.clone(), str::to_owned),
        _ => lower,
    }
}

impl GpuTypes {
    /// The provider's GPU types: the catalog's, then its built-in table.
    #[must_use]
    pub fn new(provider: BillProvider, catalog: &[CatalogType], skus: &[CatalogSku]) -> Self {
        let mut types = HashMap::new();
        for (instance_type, gpu_model, gpu_count) in catalog {
            if *gpu_count <= 0.0 {
                continue;
            }
            types.insert(
                fold(provider, instance_type),
                GpuType {
                    instance_type: instance_type.clone(),
                    gpu_model: gpu_model.clone(),
                    gpu_count: Some(*gpu_count),
                },
            );
        }
        for t in builtin(provider) {
            types.entry(fold(provider, &t.instance_type)).or_insert(t);
        }
        let skus = match provider {
            BillProvider::Gcp | BillProvider::Oci => skus
                .iter()
                .map(|(sku, instance_type, gpu_model)| {
                    (
                        sku.trim().to_owned(),
                        GpuType {
                            instance_type: instance_type.clone(),
                            gpu_model: gpu_model.clone(),
                            gpu_count: None,
                        },
                    )
                })
                .collect(),
            BillProvider::Aws | BillProvider::Azure => HashMap::new(),
        };
        Self {
            provider: Some(provider),
            types,
            skus,
        }
    }

    /// A per-GPU SKU (GCP accelerators, OCI GPU part numbers).
    #[must_use]
    pub fn sku(&self, sku_id: &str) -> Option<&GpuType> {
        // Most rows carry a SKU; AWS and Azure have no per-GPU ones to look up.
        if self.skus.is_empty() {
            return None;
        }
        self.skus.get(sku_id.trim())
    }

    /// Places an instance type; `gpu_count_hint` is what the row itself says
    /// (`SkuPriceDetails.GpuCount`).
    #[must_use]
    pub fn place(&self, instance_type: &str, gpu_count_hint: Option<f64>) -> Placement<'_> {
        let Some(provider) = self.provider else {
            return Placement::NotGpu;
        };
        if let Some(t) = self.types.get(&fold(provider, instance_type)) {
            return Placement::Gpu(t);
        }
        if gpu_count_hint.is_some_and(|n| n > 0.0) || is_gpu_family(provider, instance_type) {
            Placement::Unmapped
        } else {
            Placement::NotGpu
        }
    }
}

/// Whether the provider's tables know the instance's family as a GPU one.
fn is_gpu_family(provider: BillProvider, instance_type: &str) -> bool {
    match provider {
        #[cfg(feature = "aws")]
        BillProvider::Aws => {
            use gpuplan_providers::aws::gpus;
            gpus::model(gpus::family(instance_type)).is_some()
        }
        #[cfg(feature = "azure")]
        BillProvider::Azure => {
            let t = instance_type.trim();
            let sized = if t.len() > 9 && t[..9].eq_ignore_ascii_case("standard_") {
                format!("Standard_{}", &t[9..].to_ascii_uppercase())
            } else {
                format!("Standard_{}", t.to_ascii_uppercase())
            };
            gpuplan_providers::azure::skus::is_gpu_family(&sized)
        }
        BillProvider::Gcp => {
            let family = instance_type.split('-').next().unwrap_or_default();
            ["a2", "a3", "a4", "g2", "g4"].contains(&family.to_ascii_lowercase().as_str())
        }
        _ => false,
    }
}

/// Instance types the providers' own tables give a GPU count for.
fn builtin(provider: BillProvider) -> Vec<GpuType> {
    let table: Vec<(String, String, f64)> = match provider {
        #[cfg(feature = "aws")]
        BillProvider::Aws => gpuplan_providers::aws::gpus::sizes()
            .map(|(t, m, n)| (t.to_owned(), m.to_owned(), n))
            .collect(),
        #[cfg(feature = "azure")]
        BillProvider::Azure => gpuplan_providers::azure::skus::sizes()
            .map(|(t, m, n)| (t.to_owned(), m.to_owned(), n))
            .collect(),
        #[cfg(feature = "gcp")]
        BillProvider::Gcp => gpuplan_providers::gcp::shapes::builtin()
            .into_iter()
            .map(|s| {
                let model = gpuplan_providers::gpu::normalize(&s.accelerator, None).name;
                (s.name, model, f64::from(s.accelerator_count))
            })
            .collect(),
        _ => Vec::new(),
    };
    table
        .into_iter()
        .map(|(instance_type, gpu_model, n)| GpuType {
            instance_type,
            gpu_model,
            gpu_count: Some(n),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aws() -> GpuTypes {
        GpuTypes::new(
            BillProvider::Aws,
            &[
                ("p5.48xlarge".into(), "H100-80GB".into(), 8.0),
                ("m5.xlarge".into(), String::new(), 0.0),
            ],
            &[],
        )
    }

    #[test]
    fn catalog_types_place_with_their_gpu_count() {
        let g = aws();
        let Placement::Gpu(t) = g.place("p5.48xlarge", None) else {
            panic!("p5.48xlarge is in the catalog");
        };
        assert_eq!(
            (t.gpu_model.as_str(), t.gpu_count),
            ("H100-80GB", Some(8.0))
        );
        assert_eq!(g.place("m5.xlarge", None), Placement::NotGpu);
    }

    #[test]
    fn a_gpu_family_the_catalog_lacks_is_unmapped_not_guessed() {
        let g = aws();
        assert_eq!(g.place("p4de.12xlarge", None), Placement::Unmapped);
        assert_eq!(g.place("x9.large", Some(2.0)), Placement::Unmapped);
        assert_eq!(g.place("c7i.large", Some(0.0)), Placement::NotGpu);
    }

    #[test]
    fn azure_sizes_match_with_or_without_the_prefix_in_any_case() {
        let g = GpuTypes::new(BillProvider::Azure, &[], &[]);
        for name in ["Standard_ND96asr_v4", "ND96asr_v4", "standard_nd96asr_v4"] {
            let Placement::Gpu(t) = g.place(name, None) else {
                panic!("{name} is in the Azure table");
            };
            assert_eq!(t.instance_type, "Standard_ND96asr_v4");
            assert_eq!(t.gpu_count, Some(8.0));
        }
    }

    #[test]
    fn per_gpu_skus_are_only_for_gcp_and_oci() {
        let skus = [(
            "B93311".to_owned(),
            "BM.GPU.H100.8".to_owned(),
            "H100-80GB".to_owned(),
        )];
        let oci = GpuTypes::new(BillProvider::Oci, &[], &skus);
        assert_eq!(oci.sku("B93311").unwrap().instance_type, "BM.GPU.H100.8");
        assert!(
            GpuTypes::new(BillProvider::Aws, &[], &skus)
                .sku("B93311")
                .is_none()
        );
    }
}
