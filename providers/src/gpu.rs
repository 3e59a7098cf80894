//! GPU model normalization: every provider's spelling of an accelerator maps to one
//! catalog name (`H100-80GB`, `A10G`, ...) and its per-GPU memory in GiB, so offers
//! from different clouds compare by plain string equality.

/// A normalized accelerator: its catalog name and per-GPU memory.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuModel {
    pub name: String,
    pub memory_gib: Option<f64>,
    /// False when the name was not in the table and was kept as the provider spelled it.
    pub known: bool,
}

/// Canonical names. Models sold in several memory sizes appear once per size; the
/// memory hint picks among them (see [`normalize`]).
const MODELS: &[(&str, f64)] = &[
    ("A100-40GB", 40.0),
    ("A100-80GB", 80.0),
    ("H100-80GB", 80.0),
    ("H100-94GB", 94.0),
    ("H200-141GB", 141.0),
    ("GH200-96GB", 96.0),
    ("B200", 180.0),
    ("B300", 268.0),
    ("GB200", 186.0),
    ("GB300", 288.0),
    ("A10G", 24.0),
    ("A10", 24.0),
    ("A16", 16.0),
    ("A40", 48.0),
    ("A6000", 48.0),
    ("L4", 24.0),
    ("L40", 48.0),
    ("L40S", 48.0),
    ("V100", 16.0),
    ("V100-32GB", 32.0),
    ("T4", 16.0),
    ("T4G", 16.0),
    ("P100", 16.0),
    ("P4", 8.0),
    ("P40", 24.0),
    ("K80", 12.0),
    ("M60", 8.0),
    ("RTX6000", 24.0),
    ("RTX3090", 24.0),
    ("RTX4090", 24.0),
    ("RTX5090", 32.0),
    ("RTX6000-ADA", 48.0),
    ("RTX-PRO-6000", 96.0),
    ("RTX-PRO-4500", 32.0),
    ("ARC-PRO-B70", 32.0),
    ("MI300X", 192.0),
    ("MI325X", 256.0),
    ("MI350P", 144.0),
    ("MI350X", 288.0),
    ("MI355X", 288.0),
    ("V520", 8.0),
    ("Trainium", 32.0),
    ("Trainium2", 96.0),
    ("Inferentia", 8.0),
    ("Inferentia2", 32.0),
    ("Gaudi", 32.0),
];

/// Spellings (after [`key`] folding) that map to a canonical name. Entries whose
/// canonical name is a family (`A100`, `H100`, `V100`) are resolved by memory.
const ALIASES: &[(&str, &str)] = &[
    ("a100", "A100"),
    ("h100", "H100"),
    ("h100nvl", "H100-94GB"),
    ("h100mega", "H100-80GB"),
    ("h200", "H200-141GB"),
    ("gh200", "GH200-96GB"),
    ("b200", "B200"),
    ("b300", "B300"),
    ("h200nvl", "H200-141GB"),
    ("gb200", "GB200"),
    ("gb300", "GB300"),
    ("a10g", "A10G"),
    ("a10", "A10"),
    ("a16", "A16"),
    ("a40", "A40"),
    ("a6000", "A6000"),
    ("rtxa6000", "A6000"),
    ("l4", "L4"),
    ("l40", "L40"),
    ("l40s", "L40S"),
    ("v100", "V100"),
    ("t4", "T4"),
    ("t4g", "T4G"),
    ("p100", "P100"),
    ("p4", "P4"),
    ("p40", "P40"),
    ("h100plus", "H100-80GB"),
    ("k80", "K80"),
    ("m60", "M60"),
    ("rtx6000", "RTX6000"),
    ("rtx3090", "RTX3090"),
    ("geforcertx3090", "RTX3090"),
    ("rtx4090", "RTX4090"),
    ("geforcertx4090", "RTX4090"),
    ("rtx5090", "RTX5090"),
    ("geforcertx5090", "RTX5090"),
    ("quadrortx6000", "RTX6000"),
    ("rtx6000ada", "RTX6000-ADA"),
    ("rtxpro6000", "RTX-PRO-6000"),
    ("rtxpro6000blackwell", "RTX-PRO-6000"),
    ("rtxpro4500", "RTX-PRO-4500"),
    ("rtxpro4500blackwell", "RTX-PRO-4500"),
    ("arcprob70", "ARC-PRO-B70"),
    ("mi300x", "MI300X"),
    ("mi325x", "MI325X"),
    ("mi350p", "MI350P"),
    ("mi350x", "MI350X"),
    ("mi355x", "MI355X"),
    ("v520", "V520"),
    ("prov520", "V520"),
    ("trainium", "Trainium"),
    ("trainium1", "Trainium"),
    ("trainium2", "Trainium2"),
    ("inferentia", "Inferentia"),
    ("inferentia1", "Inferentia"),
    ("inferentia2", "Inferentia2"),
    ("gaudihl205", "Gaudi"),
    ("gaudi", "Gaudi"),
];

/// Vendor words and packaging variants that do not change which model it is.
const NOISE: &[&str] = &[
    "nvidia",
    "tesla",
    "amd",
    "instinct",
    "radeon",
    "gpu",
    "sxm",
    "sxm2",
    "sxm4",
    "sxm5",
    "sxm6",
    "pcie",
    "habana",
    "aws",
    "intel",
    "virtual",
    "workstation",
    // Memory technology and packaging words in long names ("NVIDIA H100
    // 80GB HBM3", "RTX 6000 Ada Generation", "RTX PRO 6000 Blackwell Server
    // Edition", "MI300X OAM"): the model is the same with or without them.
    "hbm2",
    "hbm2e",
    "hbm3",
    "hbm3e",
    "oam",
    "generation",
    "server",
    "edition",
];

/// Normalizes a provider's GPU name. `memory_hint_gib` is the per-GPU memory the
/// provider reported, when it did; it decides between sizes of one model (A100 40 vs
/// 80 GB). Names not in the table are kept trimmed, with the hint as their memory.
#[must_use]
pub fn normalize(provider_name: &str, memory_hint_gib: Option<f64>) -> GpuModel {
    let (folded, size_in_name) = key(provider_name);
    let hint = memory_hint_gib.or(size_in_name);
    let canonical = ALIASES
        .iter()
        .find(|(alias, _)| *alias == folded)
        .map(|(_, canonical)| resolve_family(canonical, hint));
    match canonical.and_then(|name| MODELS.iter().find(|(m, _)| *m == name)) {
        Some((name, memory)) => GpuModel {
            name: (*name).to_owned(),
            memory_gib: Some(*memory),
            known: true,
        },
        None => GpuModel {
            name: provider_name.trim().to_owned(),
            memory_gib: hint,
            known: false,
        },
    }
}

/// Two GPU counts closer than this are the same count: a sixth of a GPU is
/// stored as the nearest f64, and sums of slices round.
pub const COUNT_TOLERANCE: f64 = 1e-9;

/// Largest denominator [`count_label`] and [`parse_count`] look for: slices
/// are sold as far down as a twelfth (Alibaba's `A10*1/12`).
const MAX_DENOMINATOR: u32 = 64;

/// A GPU count as the catalog writes it: a whole count as an integer (`8`),
/// a slice as the number it is (`0.125`), so JSON and CSV of whole GPUs read
/// as they did before slices were records.
///
/// # Errors
/// Whatever the serializer returns.
#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `serialize_with` passes a reference
pub fn serialize_count<S: serde::Serializer>(count: &f64, s: S) -> Result<S::Ok, S::Error> {
    match whole(*count) {
        Some(n) => s.serialize_u32(n),
        None => s.serialize_f64(*count),
    }
}

/// A GPU count as a JSON number, whole counts as integers (see [`serialize_count`]).
#[must_use]
pub fn count_json(count: f64) -> serde_json::Value {
    whole(count).map_or_else(|| serde_json::json!(count), |n| serde_json::json!(n))
}

/// [`serialize_count`] of an optional count.
///
/// # Errors
/// Whatever the serializer returns.
#[allow(clippy::ref_option)] // serde's `serialize_with` passes a reference
pub fn serialize_opt_count<S: serde::Serializer>(
    count: &Option<f64>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match count {
        Some(c) => serialize_count(c, s),
        None => s.serialize_none(),
    }
}

/// The count as a whole number, when it is one.
#[must_use]
pub fn whole(count: f64) -> Option<u32> {
    let rounded = count.round();
    ((count - rounded).abs() < COUNT_TOLERANCE && (0.0..=f64::from(u32::MAX)).contains(&rounded))
        .then(|| {
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let n = rounded as u32;
            n
        })
}

/// The count as people write it: `8`, or `1/8` for a slice (`0.3` when it is
/// no simple fraction).
#[must_use]
pub fn count_label(count: f64) -> String {
    if let Some(n) = whole(count) {
        return n.to_string();
    }
    for d in 2..=MAX_DENOMINATOR {
        if let Some(n) = whole(count * f64::from(d)) {
            return format!("{n}/{d}");
        }
    }
    format!("{count}")
}

/// Reads a GPU count written as a number (`8`, `0.125`) or a fraction
/// (`1/7`): it must be above 0.
///
/// # Errors
/// A message saying what is wrong with `text`.
pub fn parse_count(text: &str) -> Result<f64, String> {
    let text = text.trim();
    let value = match text.split_once('/') {
        Some((n, d)) => {
            let n: u32 = n
                .trim()
                .parse()
                .map_err(|_| format!("`{text}` is not a fraction like 1/7"))?;
            let d: u32 = d
                .trim()
                .parse()
                .map_err(|_| format!("`{text}` is not a fraction like 1/7"))?;
            if d == 0 {
                return Err(format!("`{text}` divides by zero"));
            }
            f64::from(n) / f64::from(d)
        }
        None => text
            .parse::<f64>()
            .map_err(|_| format!("`{text}` is not a number"))?,
    };
    if !value.is_finite() || value <= 0.0 {
        return Err(format!("`{text}` must be above 0"));
    }
    Ok(value)
}

/// The memory an instance's GPU share gives it: the card's memory for whole
/// GPUs, that share of it for a slice (an eighth of a 24 GiB L4: 3 GiB).
#[must_use]
pub fn share_memory(card_gib: Option<f64>, count: f64) -> Option<f64> {
    card_gib.map(|m| if count < 1.0 { m * count } else { m })
}

/// Whether catalog GPU name `model` is `wanted`, a name or a family (`H100`
/// matches `H100-80GB` and `H100-94GB`, not `GH200`), case-insensitive.
#[must_use]
pub fn matches(model: &str, wanted: &str) -> bool {
    // Without allocating: the API filters a whole market's records with it.
    let (model, wanted) = (model.as_bytes(), wanted.trim().as_bytes());
    model.len() >= wanted.len()
        && model[..wanted.len()].eq_ignore_ascii_case(wanted)
        && (model.len() == wanted.len() || model[wanted.len()] == b'-')
}

/// Whether canonical `model` is sold in several forms, so that its records
/// carry a form factor.
#[must_use]
pub fn sold_in_forms(model: &str) -> bool {
    MULTI_FORM.contains(&model)
}

/// Models sold in more than one form: only these carry a form factor.
const MULTI_FORM: &[&str] = &[
    "A100-40GB",
    "A100-80GB",
    "H100-80GB",
    "H100-94GB",
    "H200-141GB",
    "V100",
    "V100-32GB",
];

/// The form factor of normalized model `model` as a provider's `text` (its
/// GPU name or description) says it: `nvl` for an H100 or H200 NVL, `sxm`
/// for SXM modules (and an H100 80GB HBM3 or a plain H200, which are only
/// made so), `pcie` for a PCIe card. `None` for single-form models and for
/// names that do not say.
#[must_use]
pub fn form_factor(model: &str, text: &str) -> Option<crate::FormFactor> {
    use crate::FormFactor::{Nvl, Pcie, Sxm};
    if !MULTI_FORM.contains(&model) {
        return None;
    }
    let t = text.to_ascii_lowercase();
    let words: Vec<&str> = t
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let has = |w: &str| words.iter().any(|x| x.starts_with(w));
    if model == "H100-94GB" || (has("nvl") && matches!(model, "H200-141GB" | "H100-80GB")) {
        return Some(Nvl);
    }
    if has("sxm") || has("hgx") {
        return Some(Sxm);
    }
    if has("pcie") {
        return Some(Pcie);
    }
    match model {
        "H100-80GB" if has("hbm3") => Some(Sxm),
        "H200-141GB" => Some(Sxm),
        _ => None,
    }
}

/// Looks up a canonical name exactly as the catalog spells it (case-insensitive).
#[must_use]
pub fn canonical(name: &str) -> Option<&'static str> {
    MODELS
        .iter()
        .map(|(m, _)| *m)
        .find(|m| m.eq_ignore_ascii_case(name.trim()))
}

fn resolve_family(name: &str, hint: Option<f64>) -> &str {
    let big = |threshold: f64| hint.is_some_and(|h| h >= threshold);
    match name {
        "A100" if big(60.0) => "A100-80GB",
        "A100" => "A100-40GB",
        "H100" if big(90.0) => "H100-94GB",
        "H100" => "H100-80GB",
        "V100" if big(24.0) => "V100-32GB",
        other => other,
    }
}

/// Folds a name to lowercase alphanumerics without vendor noise, and pulls out a
/// memory size written into it (`a100-80gb` -> (`a100`, 80)).
fn key(name: &str) -> (String, Option<f64>) {
    let mut size = None;
    let mut out = String::new();
    for token in name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_ascii_lowercase)
    {
        if NOISE.contains(&token.as_str()) {
            continue;
        }
        if let Some(gb) = token.strip_suffix("gb").and_then(|n| n.parse::<f64>().ok()) {
            size = Some(gb);
            continue;
        }
        out.push_str(&token);
    }
    (out, size)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn counts_read_and_print_as_people_write_them() {
        assert_eq!(count_label(8.0), "8");
        assert_eq!(count_label(0.125), "1/8");
        assert_eq!(count_label(1.0 / 6.0), "1/6");
        assert_eq!(count_label(1.0 / 12.0), "1/12");
        assert_eq!(count_label(0.5), "1/2");
        assert_eq!(parse_count("1/7"), Ok(1.0 / 7.0));
        assert_eq!(parse_count(" 0.25 "), Ok(0.25));
        assert_eq!(parse_count("8"), Ok(8.0));
        for bad in ["0", "-1", "1/0", "a/7", "NaN", "inf", ""] {
            assert!(parse_count(bad).is_err(), "{bad}");
        }
        let json = |c: f64| {
            let mut out = Vec::new();
            serialize_count(&c, &mut serde_json::Serializer::new(&mut out)).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(json(8.0), "8");
        assert_eq!(json(0.125), "0.125");
        assert_eq!(share_memory(Some(24.0), 0.125), Some(3.0));
        assert_eq!(share_memory(Some(80.0), 8.0), Some(80.0));
    }

    #[test]
    fn form_factors_come_from_the_name_for_models_sold_in_several_forms() {
        use crate::FormFactor::{Nvl, Pcie, Sxm};
        assert_eq!(form_factor("H100-80GB", "NVIDIA H100 80GB HBM3"), Some(Sxm));
        assert_eq!(form_factor("H100-80GB", "H100 SXM"), Some(Sxm));
        assert_eq!(form_factor("H100-80GB", "NVIDIA H100 PCIe"), Some(Pcie));
        assert_eq!(form_factor("H100-94GB", "H100 NVL"), Some(Nvl));
        assert_eq!(form_factor("H200-141GB", "NVIDIA H200"), Some(Sxm));
        assert_eq!(form_factor("H200-141GB", "NVIDIA H200 NVL"), Some(Nvl));
        assert_eq!(form_factor("A100-40GB", "A100 (40 GB SXM4)"), Some(Sxm));
        assert_eq!(form_factor("A100-80GB", "A100 80GB PCIe"), Some(Pcie));
        // Names that do not say, and single-form models.
        assert_eq!(form_factor("V100", "Tesla V100"), None);
        assert_eq!(form_factor("L40S", "L40S PCIe"), None);
        assert_eq!(form_factor("MI300X", "MI300X OAM"), None);
        assert_eq!(name("GeForce RTX 4090", None), "RTX4090");
        assert_eq!(name("RTX 5090", None), "RTX5090");
        assert_eq!(name("NVIDIA GeForce RTX 3090", None), "RTX3090");
    }

    fn name(raw: &str, hint: Option<f64>) -> String {
        normalize(raw, hint).name
    }

    #[test]
    fn each_cloud_spelling_maps_to_one_catalog_name() {
        assert_eq!(name("A100", Some(40.0)), "A100-40GB");
        assert_eq!(name("A100", Some(80.0)), "A100-80GB");
        assert_eq!(name("NVIDIA A100-SXM4-80GB", None), "A100-80GB");
        assert_eq!(name("nvidia-tesla-a100", None), "A100-40GB");
        assert_eq!(name("nvidia-a100-80gb", None), "A100-80GB");
        assert_eq!(name("H100", Some(80.0)), "H100-80GB");
        assert_eq!(name("nvidia-h100-mega-80gb", None), "H100-80GB");
        assert_eq!(name("H100 NVL", None), "H100-94GB");
        assert_eq!(name("H200", None), "H200-141GB");
        assert_eq!(name("nvidia-tesla-t4", None), "T4");
        assert_eq!(name("A10G", Some(24.0)), "A10G");
        assert_eq!(name("NVIDIA A10", None), "A10");
        assert_eq!(name("nvidia-l4", None), "L4");
        assert_eq!(name("L40S", None), "L40S");
        assert_eq!(name("V100", Some(32.0)), "V100-32GB");
        assert_eq!(name("Tesla V100", Some(16.0)), "V100");
        assert_eq!(name("AMD Instinct MI300X", None), "MI300X");
        assert_eq!(name("Radeon Pro V520", None), "V520");
        assert_eq!(name("Quadro RTX 6000", None), "RTX6000");
        assert_eq!(name("RTX A6000", None), "A6000");
        assert_eq!(name("Inferentia2", None), "Inferentia2");
        assert_eq!(name("NVIDIA RTX PRO 6000 Blackwell", None), "RTX-PRO-6000");
        assert_eq!(name("B300", None), "B300");
    }

    /// Long names as the GPU clouds and `DescribeInstanceTypes` spell them.
    #[test]
    fn long_spellings_of_known_models_normalize() {
        for (raw, model) in [
            ("NVIDIA H200 NVL", "H200-141GB"),
            ("H200 NVL", "H200-141GB"),
            ("NVIDIA H200 141GB HBM3e", "H200-141GB"),
            ("NVIDIA H100 80GB HBM3", "H100-80GB"),
            ("NVIDIA H100 NVL", "H100-94GB"),
            ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
            ("NVIDIA A100 80GB PCIe", "A100-80GB"),
            ("Tesla V100-SXM2-32GB", "V100-32GB"),
            ("NVIDIA RTX 6000 Ada Generation", "RTX6000-ADA"),
            (
                "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                "RTX-PRO-6000",
            ),
            ("AMD Instinct MI300X OAM", "MI300X"),
            ("NVIDIA B300 SXM6", "B300"),
            ("NVIDIA GB200", "GB200"),
        ] {
            let m = normalize(raw, None);
            assert!(m.known, "{raw} is not recognised");
            assert_eq!(m.name, model, "{raw}");
        }
        // The NVL board of an H200 is a form of the same model.
        assert_eq!(
            form_factor("H200-141GB", "NVIDIA H200 NVL"),
            Some(crate::FormFactor::Nvl)
        );
    }

    #[test]
    fn a10_is_not_a10g() {
        assert_ne!(name("A10", None), name("A10G", None));
    }

    #[test]
    fn memory_is_per_gpu_of_the_normalized_model_not_the_hint() {
        let m = normalize("A100", Some(39.5));
        assert_eq!(m.memory_gib, Some(40.0));
        assert!(m.known);
    }

    #[test]
    fn unknown_gpus_keep_their_name_and_reported_memory() {
        let m = normalize("  Mystery X9 ", Some(12.0));
        assert_eq!(m.name, "Mystery X9");
        assert_eq!(m.memory_gib, Some(12.0));
        assert!(!m.known);
    }

    #[test]
    fn every_alias_points_at_a_model_in_the_table() {
        for (alias, canonical) in ALIASES {
            for hint in [None, Some(16.0), Some(32.0), Some(80.0), Some(94.0)] {
                let resolved = resolve_family(canonical, hint);
                assert!(
                    MODELS.iter().any(|(m, _)| *m == resolved),
                    "alias {alias} -> {resolved} missing from MODELS"
                );
            }
        }
    }

    #[test]
    fn canonical_lookup_ignores_case() {
        assert_eq!(canonical("h100-80gb"), Some("H100-80GB"));
        assert_eq!(canonical("H100"), None);
    }
}
