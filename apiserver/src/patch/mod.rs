//! Patch application: JSON patch, merge patch, strategic merge patch, server-side apply.
