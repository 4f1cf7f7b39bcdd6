/*
 * The oracle for tests/ketama.rs: real libmemcached, configured the way its users
 * turn on ketama (MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED: MD5 keys, 160 points per
 * server), answering where each key goes.
 *
 * Build: cc -O2 -Wall -o ketama_ref ketama_ref.c -lmemcached
 *        (Debian: apt-get install libmemcached-dev)
 *
 * Reads lines from stdin and echoes each one to stdout:
 *   servers SPEC...   a new memcached_st with these servers, in order. SPEC is
 *                     host:port:weight (host may contain ':', e.g. ::1) or
 *                     /unix/socket/path:weight.
 *   key KEY           echoed with " INDEX" appended: memcached_generate_hash(),
 *                     the index of the server libmemcached sends KEY to.
 *   store KEY         memcached_set(KEY, value KEY) on the live servers; echoed
 *                     once stored.
 *   fetch KEY         memcached_get(KEY) from the live servers; echoed with
 *                     " VALUE" appended, or " MISS".
 * The first output line is "# libmemcached VERSION".
 */
#include <libmemcached/memcached.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static memcached_st *memc;

static void die(const char *what, const char *detail) {
  fprintf(stderr, "ketama_ref: %s: %s\n", what, detail);
  exit(1);
}

static void check(memcached_return_t rc, const char *what) {
  if (rc != MEMCACHED_SUCCESS) {
    die(what, memcached_last_error_message(memc));
  }
}

static void add_server(char *spec) {
  char *w = strrchr(spec, ':');
  if (w == NULL) {
    die("no weight in", spec);
  }
  *w++ = '\0';
  uint32_t weight = (uint32_t) strtoul(w, NULL, 10);
  if (spec[0] == '/') {
    check(memcached_server_add_unix_socket_with_weight(memc, spec, weight), spec);
    return;
  }
  char *p = strrchr(spec, ':');
  if (p == NULL) {
    die("no port in", spec);
  }
  *p++ = '\0';
  in_port_t port = (in_port_t) strtoul(p, NULL, 10);
  check(memcached_server_add_with_weight(memc, spec, port, weight), spec);
}

int main(void) {
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  printf("# libmemcached %s\n", memcached_lib_version());
  while ((n = getline(&line, &cap, stdin)) > 0) {
    if (line[n - 1] == '\n') {
      line[--n] = '\0';
    }
    if (strncmp(line, "servers ", 8) == 0) {
      printf("%s\n", line);
      if (memc != NULL) {
        memcached_free(memc);
      }
      memc = memcached_create(NULL);
      if (memc == NULL) {
        die("memcached_create", "NULL");
      }
      check(memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1), "behavior");
      for (char *tok = strtok(line + 8, " "); tok != NULL; tok = strtok(NULL, " ")) {
        add_server(tok);
      }
    } else if (strncmp(line, "key ", 4) == 0 && memc != NULL) {
      uint32_t index = memcached_generate_hash(memc, line + 4, (size_t) n - 4);
      printf("%s %u\n", line, index);
    } else if (strncmp(line, "store ", 6) == 0 && memc != NULL) {
      const char *key = line + 6;
      size_t len = (size_t) n - 6;
      check(memcached_set(memc, key, len, key, len, 0, 0), key);
      printf("%s\n", line);
    } else if (strncmp(line, "fetch ", 6) == 0 && memc != NULL) {
      const char *key = line + 6;
      size_t len = (size_t) n - 6, vlen = 0;
      uint32_t flags = 0;
      memcached_return_t rc;
      char *value = memcached_get(memc, key, len, &vlen, &flags, &rc);
      if (value != NULL) {
        printf("%s %.*s\n", line, (int) vlen, value);
        free(value);
      } else if (rc == MEMCACHED_NOTFOUND) {
        printf("%s MISS\n", line);
      } else {
        check(rc, key);
      }
    } else {
      die("bad input line", line);
    }
  }
  free(line);
  if (memc != NULL) {
    memcached_free(memc);
  }
  return 0;
}
