-- The form a GPU model is sold in where it is sold in several (an H100 as an
-- SXM module, a PCIe card or an NVL board): beside gpu_model, which stays the
-- same for all of them. Null where the model has one form or the provider's
-- name does not say; the next sync of each source fills it.
ALTER TABLE instance_types ADD COLUMN gpu_form_factor TEXT
    CHECK (gpu_form_factor IN ('sxm', 'pcie', 'nvl'));
