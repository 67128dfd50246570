/* test_stagedir.c: staging directories (common/io/stagedir.h): one whose owner died is swept by
 * the next gk_stagedir_make (of any tool), a live one never is, nor a directory without the
 * marker, nor one of another name (gpt-train's unsent checkpoints); removing from a signal
 * handler's function takes the files and the directory. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/io/stagedir.h"
#include "test.h"

static char top[64];

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

static void touch(const char *dir, const char *name)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("x", f);
        fclose(f);
    }
}

/* A staging directory made by a child that then dies (its lock gone with it): its path. */
static void dead_owner(const char *tool, char *path, size_t cap)
{
    int fd[2];
    path[0] = '\0';
    if (pipe(fd) != 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        gk_stagedir d;
        gk_err e = {0};
        if (gk_stagedir_make(&d, top, tool, &e) == 0) {
            touch(d.path, "ckpt_00000002.safetensors");
            if (write(fd[1], d.path, sizeof d.path) < 0)
                _exit(1);
        }
        _exit(0); /* as if killed: nothing removed */
    }
    close(fd[1]);
    char buf[4096] = "";
    ssize_t n = read(fd[0], buf, sizeof buf);
    close(fd[0]);
    waitpid(pid, NULL, 0);
    if (n > 0)
        snprintf(path, cap, "%s", buf);
}

static void test_sweep(void)
{
    char dead1[4096], dead2[4096], other[4200], nomark[4200];
    gk_err e = {0};
    gk_stagedir live = {.fd = -1}, next = {.fd = -1};
    dead_owner("gpt-train", dead1, sizeof dead1);
    CHECK(dead1[0] && exists(dead1));
    dead_owner("gpt-tokenize", dead2, sizeof dead2); /* another tool's make sweeps it */
    CHECKF(!exists(dead1), "%s left", dead1);
    CHECK(dead2[0] && exists(dead2));
    CHECK_OK(gk_stagedir_make(&live, top, "gpt-train", &e), &e);
    touch(live.path, "ckpt_00000004.safetensors");
    snprintf(other, sizeof other, "%s/gpt-train-unsent.0123456789abcdef", top);
    snprintf(nomark, sizeof nomark, "%s/gpt-train.AbC123", top);
    mkdir(other, 0700);
    touch(other, "ckpt_00000003.safetensors");
    mkdir(nomark, 0700);
    CHECK_OK(gk_stagedir_make(&next, top, "gpt-ckpt", &e), &e); /* sweeps first */
    CHECKF(!exists(dead1), "%s left", dead1);
    CHECKF(!exists(dead2), "%s left", dead2);
    CHECK(exists(live.path) && exists(next.path) && exists(other) && exists(nomark));
    char f[4400];
    snprintf(f, sizeof f, "%s/ckpt_00000004.safetensors", live.path);
    CHECK(exists(f));
    CHECK(gk_stagedir_sweep(top) == 0);
    char keep[4096];
    snprintf(keep, sizeof keep, "%s", live.path);
    gk_stagedir_remove(&live);
    CHECK(!exists(keep) && live.path[0] == '\0' && live.fd == -1);
    gk_stagedir_remove(&live); /* twice: nothing */
    gk_stagedir_remove_path(next.path);
    CHECK(!exists(next.path));
    gk_stagedir_remove(&next);
    gk_stagedir zero = {0};
    gk_stagedir_remove(&zero); /* never made */
    snprintf(f, sizeof f, "%s/ckpt_00000003.safetensors", other);
    unlink(f);
    rmdir(other);
    rmdir(nomark);
}

static void test_make_fails(void)
{
    gk_stagedir d;
    gk_err e = {0};
    CHECK(gk_stagedir_make(&d, "/nonexistent/dir", "gpt-train", &e) != 0);
    CHECKF(strstr(e.msg, "/nonexistent/dir") && strstr(e.msg, "TMPDIR"), "%s", e.msg);
    CHECK(d.path[0] == '\0');
    gk_stagedir_remove(&d);
}

int main(void)
{
    snprintf(top, sizeof top, "/tmp/gk_stagedir_XXXXXX");
    if (!mkdtemp(top))
        return 1;
    RUN(test_sweep);
    RUN(test_make_fails);
    rmdir(top);
    return TEST_END();
}
