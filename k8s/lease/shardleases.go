package lease

import (
	"context"
	"fmt"
	"strconv"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The labels of a group's Leases: the group, the role (a member's
// membership or a slot's claim) and, on a slot's Lease, its number.
const (
	labelGroup = "converge.dev/shard-group"
	labelRole  = "converge.dev/shard-role"
	labelSlot  = "converge.dev/slot"
	roleMember = "member"
	roleSlot   = "slot"
)

// groupView is one list of the group's Leases, with the local times the
// request was sent and its answer came back.
type groupView struct {
	sent, returned time.Time
	members        map[string]*coordv1.Lease // by holder
	slots          []*coordv1.Lease          // by slot; nil: absent
}

func (m *Sharder) memberLeaseName() string    { return m.cfg.Name + "-m-" + m.cfg.Identity }
func (m *Sharder) slotLeaseName(s int) string { return fmt.Sprintf("%s-s-%d", m.cfg.Name, s) }

// callTimeout bounds every request: a renewal slower than LeaseDuration -
// RenewDeadline does not count anyway.
func (m *Sharder) callTimeout() time.Duration { return m.cfg.LeaseDuration - m.cfg.RenewDeadline }

// list reads every Lease of the group in one consistent list.
func (m *Sharder) list(ctx context.Context) (groupView, error) {
	ctx, cancel := context.WithTimeout(ctx, m.callTimeout())
	defer cancel()
	v := groupView{sent: time.Now(), members: map[string]*coordv1.Lease{}, slots: make([]*coordv1.Lease, m.cfg.Slots)}
	sel := labels.SelectorFromSet(labels.Set{labelGroup: m.cfg.Name}).String()
	list, err := m.cfg.Client.Leases(m.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return v, fmt.Errorf("list the group's leases: %w", err)
	}
	v.returned = time.Now()
	for i := range list.Items {
		l := &list.Items[i]
		switch l.Labels[labelRole] {
		case roleMember:
			if h := holderOf(l); h != "" {
				v.members[h] = l
			}
		case roleSlot:
			if s, err := strconv.Atoi(l.Labels[labelSlot]); err == nil && s >= 0 && s < m.cfg.Slots && l.Name == m.slotLeaseName(s) {
				v.slots[s] = l
			}
		}
	}
	return v, nil
}

// holderOf returns the Lease's holder, "" for none.
func holderOf(l *coordv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// transitionsOf returns the Lease's leaseTransitions, 0 for none.
func transitionsOf(l *coordv1.Lease) int32 {
	if l == nil || l.Spec.LeaseTransitions == nil {
		return 0
	}
	return *l.Spec.LeaseTransitions
}

// renewMember writes this replica's membership Lease, creating it when
// absent, and returns when the write was sent; member is the Lease last
// written (nil: read it first).
func (m *Sharder) renewMember(ctx context.Context, member *coordv1.Lease) (*coordv1.Lease, time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, m.callTimeout())
	defer cancel()
	leases := m.cfg.Client.Leases(m.cfg.Namespace)
	if member == nil {
		got, err := leases.Get(ctx, m.memberLeaseName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, time.Time{}, err
		default:
			member = got
		}
	}
	sent := time.Now()
	now := metav1.NewMicroTime(sent)
	if member == nil {
		l := m.newLease(m.memberLeaseName(), roleMember, -1)
		l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
		out, err := leases.Create(ctx, l, metav1.CreateOptions{})
		return out, sent, err
	}
	l := member.DeepCopy()
	l.Spec.HolderIdentity = &m.cfg.Identity
	l.Spec.RenewTime = &now
	out, err := leases.Update(ctx, l, metav1.UpdateOptions{})
	return out, sent, err
}

// newLease returns a Lease of the group held by this replica, for slot
// (-1: the membership Lease).
func (m *Sharder) newLease(name, role string, slot int) *coordv1.Lease {
	secs := int32(m.cfg.LeaseDuration.Round(time.Second) / time.Second)
	l := &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: m.cfg.Namespace,
			Labels: map[string]string{labelGroup: m.cfg.Name, labelRole: role}},
		Spec: coordv1.LeaseSpec{HolderIdentity: &m.cfg.Identity, LeaseDurationSeconds: &secs},
	}
	if slot >= 0 {
		l.Labels[labelSlot] = strconv.Itoa(slot)
		zero := int32(0)
		l.Spec.LeaseTransitions = &zero
	}
	return l
}

// writeClaim makes this replica the holder of slot's Lease: a create if
// absent, else an update conditional on the resourceVersion listed
// (the compare-and-swap that gives one holder at a time), with
// leaseTransitions one higher, which makes the new claim's Token the
// highest of the slot.
func (m *Sharder) writeClaim(ctx context.Context, slot int, cur *coordv1.Lease) (*coordv1.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, m.callTimeout())
	defer cancel()
	leases := m.cfg.Client.Leases(m.cfg.Namespace)
	now := metav1.NewMicroTime(time.Now())
	if cur == nil {
		l := m.newLease(m.slotLeaseName(slot), roleSlot, slot)
		l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
		return leases.Create(ctx, l, metav1.CreateOptions{})
	}
	l := cur.DeepCopy()
	next := transitionsOf(cur) + 1
	l.Spec.HolderIdentity, l.Spec.LeaseTransitions = &m.cfg.Identity, &next
	l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
	return leases.Update(ctx, l, metav1.UpdateOptions{})
}

// writeRelease clears the holder of a slot's Lease this replica holds,
// conditional on the resourceVersion listed: a newer holder is never
// cleared.
func (m *Sharder) writeRelease(ctx context.Context, cur *coordv1.Lease) error {
	ctx, cancel := context.WithTimeout(ctx, m.callTimeout())
	defer cancel()
	l := cur.DeepCopy()
	none := ""
	now := metav1.NewMicroTime(time.Now())
	l.Spec.HolderIdentity, l.Spec.RenewTime = &none, &now
	_, err := m.cfg.Client.Leases(m.cfg.Namespace).Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// deleteMember removes this replica's membership Lease at a clean stop:
// the others reassign its slots at their next look.
func (m *Sharder) deleteMember(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.callTimeout())
	defer cancel()
	err := m.cfg.Client.Leases(m.cfg.Namespace).Delete(ctx, m.memberLeaseName(), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
