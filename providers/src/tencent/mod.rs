//! Tencent
