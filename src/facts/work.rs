//! How much work a GPU does relative to a reference GPU, on a named
//! workload (measured rows of one source and round) or by a datasheet ratio
//! (`spec:<format>`, an estimate).

use serde::Serialize;

use super::{Facts, PerfRow, gpus::FORMATS};

/// The reference when none is named: the GPU most prices are compared with.
pub const DEFAULT_REFERENCE: &str = "H100-80GB/sxm";

/// A GPU model with an optional form factor, as `MODEL[/FORM]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelForm {
    pub gpu_model: String,
    pub gpu_form_factor: Option<String>,
}

impl ModelForm {
    /// Reads `H100-80GB` or `H100-80GB/sxm` (a family or alias is refused:
    /// a reference is one model).
    ///
    /// # Errors
    /// A name the catalog does not know, or a form factor that is not one.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (model, form) = match text.split_once('/') {
            Some((m, f)) => (m, Some(f)),
            None => (text, None),
        };
        let gpu_model = gpuplan_providers::gpu::canonical(model)
            .ok_or_else(|| format!("`{model}` is not a catalog GPU name (e.g. H100-80GB)"))?;
        let gpu_form_factor = form
            .map(|f| {
                f.parse::<gpuplan_providers::FormFactor>()
                    .map(|f| f.as_str().to_owned())
            })
            .transpose()?;
        Ok(Self {
            gpu_model: gpu_model.to_owned(),
            gpu_form_factor,
        })
    }

    fn label(&self) -> String {
        match &self.gpu_form_factor {
            Some(f) => format!("{}/{f}", self.gpu_model),
            None => self.gpu_model.clone(),
        }
    }
}

/// One GPU's work per hour relative to the reference's, and what it rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Factor {
    pub workload: String,
    pub reference: String,
    pub factor: f64,
    /// From datasheet figures, not a measurement.
    pub estimate: bool,
    /// The measured row the factor's GPU value came from, and the
    /// reference's; none for a datasheet ratio.
    pub row: Option<PerfRow>,
    pub reference_row: Option<PerfRow>,
}

/// A workload's factors against one reference GPU.
#[derive(Debug, Clone)]
pub struct Work<'a> {
    facts: &'a Facts,
    workload: String,
    reference: ModelForm,
    basis: Basis<'a>,
}

#[derive(Debug, Clone)]
enum Basis<'a> {
    /// The rows of one workload, and the reference's best.
    Measured {
        rows: Vec<&'a PerfRow>,
        reference: &'a PerfRow,
    },
    /// A datasheet format and the reference's dense figure in it.
    Spec {
        format: &'static str,
        reference: f64,
    },
}

/// The best row (highest per-GPU value) among `rows` of `model` whose form
/// is `form` or unstated. A model whose rows are of another form has none.
fn best<'a>(rows: &[&'a PerfRow], model: &str, form: Option<&str>) -> Option<&'a PerfRow> {
    rows.iter()
        .copied()
        .filter(|r| {
            r.gpu_model == model
                && (r.gpu_form_factor.is_none() || r.gpu_form_factor.as_deref() == form)
        })
        .max_by(|a, b| a.value.total_cmp(&b.value))
}

impl Facts {
    /// The factors of `workload` (a workload of the perf rows, or
    /// `spec:<format>`) against `reference` (`MODEL[/FORM]`).
    ///
    /// # Errors
    /// An unknown workload or format, or a reference without a figure in it,
    /// naming what there is.
    pub fn work(&self, workload: &str, reference: &str) -> Result<Work<'_>, String> {
        let reference = ModelForm::parse(reference)?;
        let basis = if let Some(format) = workload.strip_prefix("spec:") {
            let format = FORMATS
                .iter()
                .copied()
                .find(|f| *f == format)
                .ok_or_else(|| {
                    format!(
                        "`{format}` is not a datasheet format; formats: {}",
                        FORMATS.join(", ")
                    )
                })?;
            let figure = self
                .gpu(&reference.gpu_model, reference.gpu_form_factor.as_deref())
                .and_then(|g| g.tflops.get(format))
                .ok_or_else(|| {
                    format!(
                        "the reference {} has no {format} figure in the GPU facts",
                        reference.label()
                    )
                })?;
            Basis::Spec {
                format,
                reference: figure,
            }
        } else {
            let rows: Vec<&PerfRow> = self
                .perf
                .iter()
                .filter(|r| r.workload == workload)
                .collect();
            if rows.is_empty() {
                return Err(format!(
                    "no workload `{workload}`; known: {}, or spec:<format> ({})",
                    super::workloads(&self.perf).join(", "),
                    FORMATS.join(", ")
                ));
            }
            let found = best(
                &rows,
                &reference.gpu_model,
                reference.gpu_form_factor.as_deref(),
            )
            .or_else(|| {
                // A reference named without its form takes any of its rows.
                reference.gpu_form_factor.is_none().then(|| {
                    rows.iter()
                        .copied()
                        .filter(|r| r.gpu_model == reference.gpu_model)
                        .max_by(|a, b| a.value.total_cmp(&b.value))
                })?
            });
            let Some(reference_row) = found else {
                let mut measured: Vec<&str> = rows.iter().map(|r| r.gpu_model.as_str()).collect();
                measured.sort_unstable();
                measured.dedup();
                return Err(format!(
                    "the reference {} has no row in {workload}; measured: {}",
                    reference.label(),
                    measured.join(", ")
                ));
            };
            Basis::Measured {
                rows,
                reference: reference_row,
            }
        };
        Ok(Work {
            facts: self,
            workload: workload.to_owned(),
            reference,
            basis,
        })
    }
}

impl Work<'_> {
    #[must_use]
    pub fn workload(&self) -> &str {
        &self.workload
    }

    /// The reference as `MODEL[/FORM]`.
    #[must_use]
    pub fn reference(&self) -> String {
        self.reference.label()
    }

    /// The reference's measured row; none for a datasheet ratio.
    #[must_use]
    pub fn reference_row(&self) -> Option<&PerfRow> {
        match &self.basis {
            Basis::Measured { reference, .. } => Some(reference),
            Basis::Spec { .. } => None,
        }
    }

    /// Whether the factors come from datasheets rather than measurements.
    #[must_use]
    pub fn is_estimate(&self) -> bool {
        matches!(self.basis, Basis::Spec { .. })
    }

    /// The factor alone, without the rows it rests on (for sorting and
    /// tables, where copying the rows for every cell would be waste).
    #[must_use]
    pub fn ratio(&self, model: &str, form: Option<&str>) -> Option<f64> {
        match &self.basis {
            Basis::Measured { rows, reference } => {
                Some(best(rows, model, form)?.value / reference.value)
            }
            Basis::Spec { format, reference } => {
                Some(self.facts.gpu(model, form)?.tflops.get(format)? / reference)
            }
        }
    }

    /// The factor of one GPU model and form, or `None` when the workload
    /// has no figure for it.
    #[must_use]
    pub fn factor(&self, model: &str, form: Option<&str>) -> Option<Factor> {
        let (factor, row, reference_row, estimate) = match &self.basis {
            Basis::Measured { rows, reference } => {
                let row = best(rows, model, form)?;
                (
                    row.value / reference.value,
                    Some(row.clone()),
                    Some((*reference).clone()),
                    false,
                )
            }
            Basis::Spec { format, reference } => {
                let figure = self.facts.gpu(model, form)?.tflops.get(format)?;
                (figure / reference, None, None, true)
            }
        };
        Some(Factor {
            workload: self.workload.clone(),
            reference: self.reference.label(),
            factor,
            estimate,
            row,
            reference_row,
        })
    }
}
