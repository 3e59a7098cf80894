-- What a price buys: a rentable machine ('instance'), or GPUs that must be
-- attached to a machine priced separately ('gpu_only', GCP's per-accelerator
-- SKUs). Plans are made of instances only.
ALTER TABLE price_series ADD COLUMN price_scope TEXT NOT NULL DEFAULT 'instance'
    CHECK (price_scope IN ('instance', 'gpu_only'));
-- GCP's accelerator records are named by Compute Engine's accelerator id
-- (nvidia-...); its machine types (a2-..., g2-...) are instances. The next
-- GCP sync states every scope itself.
UPDATE price_series SET price_scope = 'gpu_only'
WHERE provider = 'gcp' AND instance_type LIKE 'nvidia-%';
