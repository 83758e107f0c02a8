// Package replacerecord keeps the replacements in flight of one etcd StatefulSet (replace.Record, one per
// ordinal) in a ConfigMap next to it, <sts>-etcd-rollout-replacing. A run writes a member's record before it
// removes the member and completes it after it adds the learner: it is the only memory that crosses a killed
// run, so unlike the status ConfigMap every write must land before the run goes on. A record is deleted once
// its new member passed its gates (Delete), and every record once the roll is done (Clear).
package replacerecord

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/etcd-rollout/pulumi-etcd-rollout/rollout/internal/replace"
)

// Name is the ConfigMap that holds the records of StatefulSet sts.
func Name(sts string) string { return sts + "-etcd-rollout-replacing" }

// Store reads and writes the records of one StatefulSet.
type Store struct {
	kube           kubernetes.Interface
	namespace, sts string
	// retry runs one API call again while the API server is briefly away (the engine's kubeapi.WithRetry).
	retry func(context.Context, func(context.Context) error) error
}

// New is the store of StatefulSet sts in namespace. retry, when set, runs each API call as the engine runs
// its others (again while the API server is away); nil runs it once.
func New(kube kubernetes.Interface, namespace, sts string, retry func(context.Context, func(context.Context) error) error) *Store {
	if retry == nil {
		retry = func(ctx context.Context, call func(context.Context) error) error { return call(ctx) }
	}
	return &Store{kube: kube, namespace: namespace, sts: sts, retry: retry}
}

// get reads the ConfigMap, again while the API server is away.
func (s *Store) get(ctx context.Context) (cm *corev1.ConfigMap, err error) {
	err = s.retry(ctx, func(ctx context.Context) (err error) {
		cm, err = s.kube.CoreV1().ConfigMaps(s.namespace).Get(ctx, Name(s.sts), metav1.GetOptions{})
		return err
	})
	return cm, err
}

// Load returns the records by ordinal; none when the ConfigMap does not exist.
func (s *Store) Load(ctx context.Context) (map[int]replace.Record, error) {
	cm, err := s.get(ctx)
	if apierrors.IsNotFound(err) {
		return map[int]replace.Record{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the replacements in flight (ConfigMap %s/%s): %w", s.namespace, Name(s.sts), err)
	}
	return decode(cm.Data)
}

// Save writes ordinal's record, creating the ConfigMap on first use.
func (s *Store) Save(ctx context.Context, ordinal int, r replace.Record) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.update(ctx, func(data map[string]string) { data[strconv.Itoa(ordinal)] = string(raw) })
}

// Delete removes ordinal's record: its replacement is done (the new member passed its gates).
func (s *Store) Delete(ctx context.Context, ordinal int) error {
	cm, err := s.get(ctx)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		if _, ok := cm.Data[strconv.Itoa(ordinal)]; !ok {
			return nil
		}
	}
	return s.update(ctx, func(data map[string]string) { delete(data, strconv.Itoa(ordinal)) })
}

// Clear removes every record (the roll is done). The ConfigMap stays, empty: deleting it would need a verb the
// rollout's Role does not otherwise grant.
func (s *Store) Clear(ctx context.Context) error {
	cm, err := s.get(ctx)
	if apierrors.IsNotFound(err) || (err == nil && len(cm.Data) == 0) {
		return nil
	}
	return s.update(ctx, func(data map[string]string) { clear(data) })
}

// update reads the ConfigMap (or starts a new one), applies change and writes it, again on a conflict.
func (s *Store) update(ctx context.Context, change func(map[string]string)) error {
	cms := s.kube.CoreV1().ConfigMaps(s.namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := s.get(ctx)
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: Name(s.sts), Namespace: s.namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "etcd-rollout", "etcd-rollout.pulumi.com/statefulset": s.sts}},
				Data: map[string]string{}}
			change(cm.Data)
			err = s.retry(ctx, func(ctx context.Context) (err error) {
				_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
				return err
			})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), cm.Name, err) // created meanwhile: again
			}
			return err
		}
		if err != nil {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		change(cm.Data)
		return s.retry(ctx, func(ctx context.Context) (err error) {
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("recording a replacement in ConfigMap %s/%s (the rollout's Role grants get, create and update on configmaps): %w",
			s.namespace, Name(s.sts), err)
	}
	return nil
}

func decode(data map[string]string) (map[int]replace.Record, error) {
	out := make(map[int]replace.Record, len(data))
	for key, raw := range data {
		ordinal, err := strconv.Atoi(key)
		if err != nil {
			return nil, fmt.Errorf("replacement record %q: not an ordinal", key)
		}
		var r replace.Record
		if err := json.Unmarshal([]byte(raw), &r); err != nil {
			return nil, fmt.Errorf("replacement record of ordinal %d: %w", ordinal, err)
		}
		out[ordinal] = r
	}
	return out, nil
}
