/* uroce command-line tool: shared prototypes. */
#ifndef UROCE_CLI_H
#define UROCE_CLI_H

#include <stddef.h>
#include <stdio.h>

#ifndef UROCE_VERSION
#define UROCE_VERSION "0.1.0"
#endif

/* Exit status for errors of uroce itself (bad usage is 2). */
#define CLI_EXIT_USAGE 2

/* Each subcommand gets argv[0] == its own name. */
int cmd_run(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_topo(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_stat(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_model(int argc, char **argv);
int cmd_mpirun(int argc, char **argv);

void usage_run(FILE *f);
void usage_status(FILE *f);
void usage_demo(FILE *f);
void usage_topo(FILE *f);
void usage_doctor(FILE *f);
void usage_stat(FILE *f);
void usage_trace(FILE *f);
void usage_model(FILE *f);
void usage_mpirun(FILE *f);

/* The directory holding our libibverbs.so.1: <dir of the CLI>/../lib,
 * resolved through realpath(/proc/self/exe). Returns 0 and fills buf, or
 * -1 with a message printed. When must_exist is set, also checks that
 * libibverbs.so.1 is there. */
int cli_lib_dir(char *buf, size_t len, int must_exist);

/* 1 when UROCE_LOG asks for info lines (info or debug), as the libraries
 * read it (src/common/log.c). */
int cli_log_info(void);

/* Writes s as a JSON string literal (json.c). */
void cli_json_str(FILE *f, const char *s);

/* uroce demo --gpu (demo_gpu.c); 77 when there is no GPU. */
int demo_gpu(size_t size);

#endif
