# test/lib/roots.sh: the host's /proc, /sys, /dev and /dev/pts bound into a Debian root
# for chroot, and taken out again (sourced, bash; test/matrix and test/deb).
# shellcheck shell=bash
#
#   rl_root_overlay BASE ROOT
#                           mount at ROOT an overlay of the unpacked root BASE, its writes
#                           kept in ROOT.upper (and ROOT.work, overlayfs' own), remembering
#                           the mount: several roots from one unpacked copy, BASE unchanged
#   rl_root_mount ROOT      bind the four into ROOT, remembering each mount
#   rl_root_unmount_all     lazily unmount every mount made so far, newest first; call it
#                           before removing a root, so that rm never reaches the host's
#                           /dev or /proc

RL_ROOT_MOUNTS=()

rl_root_overlay()
{
	local base=$1 root=$2
	mkdir -p "$root" "$root.upper" "$root.work" &&
		mount -t overlay overlay \
			-o "lowerdir=$base,upperdir=$root.upper,workdir=$root.work" "$root" &&
		RL_ROOT_MOUNTS+=("$root")
}

rl_root_mount()
{
	local root=$1 m
	for m in proc sys dev dev/pts; do
		mount --bind "/$m" "$root/$m" && RL_ROOT_MOUNTS+=("$root/$m") || return 1
	done
}

rl_root_unmount_all()
{
	local i
	for ((i = ${#RL_ROOT_MOUNTS[@]} - 1; i >= 0; i--)); do
		umount -l "${RL_ROOT_MOUNTS[i]}" 2>/dev/null
	done
	RL_ROOT_MOUNTS=()
}
