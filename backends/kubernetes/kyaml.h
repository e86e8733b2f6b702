/*
 * The YAML that kubeconfig files are written in, read into JSON values (jansson), bounded.
 *
 * A kubeconfig is JSON (a flow document: read by jansson as it is) or block YAML as kubectl
 * and the cloud tools write it. Of block YAML this reads: mappings, sequences (also at their
 * key's indentation, as kubectl writes them), "- key: value" items, plain, 'single-quoted'
 * and "double-quoted" scalars (the escapes \\ \" \/ \n \t \r \uXXXX), flow collections on
 * one line ([a, "b"], {k: v}, nested), comments, and one "---" first. Every scalar is a JSON string (a
 * reader compares "true"); a key without a value is null.
 *
 * Refused, with the line named: tabs in indentation, anchors, aliases, tags, block scalars
 * (| and >), flow collections over several lines, plain scalars over several lines, a second
 * document, a duplicate key, nesting deeper than KYAML_DEPTH, and anything else it cannot
 * place. Nothing is guessed: what is refused is said.
 */
#ifndef SANDBOX_KUBERNETES_KYAML_H
#define SANDBOX_KUBERNETES_KYAML_H

#include <jansson.h>
#include <stddef.h>

#include "../../src/base/err.h"

#define KYAML_MAX (4u << 20) /* bytes of a document, at most */
#define KYAML_DEPTH 32

/* Parses the n bytes at text (need not be NUL-terminated). The document (caller frees with
 * json_decref), or NULL with e saying why (and on which line). */
json_t *kyaml_parse(const char *text, size_t n, struct err *e);

#endif
