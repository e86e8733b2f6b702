/*
 * The backends, in the order `--backend auto` tries them: one line each. A backend is a folder
 * backends/NAME/ whose code defines `const struct backend_ops NAME_backend_ops` (backend.h).
 */
BACKEND(daytona)
BACKEND(kubernetes)
BACKEND(docker)
BACKEND(local)
