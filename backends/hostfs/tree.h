/*
 * Removing a folder tree that sandboxed code wrote, whatever it did to it: entries are
 * removed without following symlinks, and folders it made unreadable are opened up first.
 */
#ifndef SANDBOX_TREE_H
#define SANDBOX_TREE_H

/* Removes path and everything below it. 0, or -1 with errno set (ENOENT is success). */
int tree_remove(const char *path);

/* Removes everything inside the open folder dirfd, leaving the folder. 0, or -1 with errno. */
int tree_empty(int dirfd);

#endif
