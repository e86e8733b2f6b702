/*
 * The files embedded in the binary at build time (the schemas folder), and a validator for the
 * part of JSON Schema those files use: type, enum, properties, required, additionalProperties
 * (false or a schema), maxProperties, propertyNames, items, min/maxLength, min/maxItems,
 * minimum, maximum, exclusiveMinimum, pattern (POSIX extended regular expressions).
 */
#ifndef SANDBOX_SCHEMA_H
#define SANDBOX_SCHEMA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "../base/err.h"

/* Parses an embedded file ("schemas/NAME"). New reference, or NULL with e set. */
json_t *schema_load(const char *name, struct err *e);

/* The name of the entry k of the object named at, in messages: at.k for a property of the
 * schema's, at["k"] (JSON-quoted, at most 200 bytes of k) for a name the caller chose, such as
 * a files path ("files[\"../x\"]"), which dots would only blur. Into buf (n bytes); returns buf. */
const char *schema_entry_name(char *buf, size_t n, const char *at, const char *k, bool chosen);

/* 0 when inst matches schema; else -1 and e names the first mismatch, e.g.
 * "script: must be a string". `at` is the name of inst in messages ("" for the root). */
int schema_validate(const json_t *schema, const json_t *inst, const char *at, struct err *e);

#endif
